/**
 * The address guard's ranges (src/lib/address-guard.ts FORBIDDEN_RANGES): each entry of IANA's IPv4
 * and IPv6 Special-Purpose Address Registries that is not globally reachable is refused, at its
 * first and last address, and the addresses just outside it are not (where they are public). The
 * IPv6 forms that carry an IPv4 host are judged by it, 6to4 included.
 */
import { describe, expect, it } from 'vitest';
import { addressAllowed, FORBIDDEN_RANGES, isForbiddenAddress, parseFetchAllow } from '../../src/lib/address-guard.js';

/** [range, an address inside it, its last address, a public neighbour outside it (null: none is public)] */
const IPV4: Array<[string, string, string, string | null]> = [
  ['0.0.0.0/8 ("this network")', '0.0.0.0', '0.255.255.255', '1.0.0.1'],
  ['10.0.0.0/8 (private use)', '10.0.0.1', '10.255.255.255', '11.0.0.1'],
  ['100.64.0.0/10 (shared address space)', '100.64.0.1', '100.127.255.255', '100.128.0.1'],
  ['127.0.0.0/8 (loopback)', '127.0.0.1', '127.255.255.255', '128.0.0.1'],
  ['169.254.0.0/16 (link-local)', '169.254.1.1', '169.254.255.255', '169.255.0.1'],
  ['172.16.0.0/12 (private use)', '172.16.0.1', '172.31.255.255', '172.32.0.1'],
  ['192.0.0.0/24 (IETF protocol assignments)', '192.0.0.1', '192.0.0.255', '192.0.1.1'],
  ['192.0.0.0/29 (IPv4 service continuity)', '192.0.0.2', '192.0.0.7', null],
  ['192.0.0.8/32 (IPv4 dummy address)', '192.0.0.8', '192.0.0.8', null],
  ['192.0.0.170/31 (NAT64/DNS64 discovery)', '192.0.0.170', '192.0.0.171', null],
  ['192.0.2.0/24 (documentation, TEST-NET-1)', '192.0.2.1', '192.0.2.255', '192.0.3.1'],
  ['192.88.99.0/24 (6to4 relay anycast)', '192.88.99.1', '192.88.99.255', '192.88.100.1'],
  ['192.168.0.0/16 (private use)', '192.168.0.1', '192.168.255.255', '192.169.0.1'],
  ['198.18.0.0/15 (benchmarking)', '198.18.0.1', '198.19.255.255', '198.20.0.1'],
  ['198.51.100.0/24 (documentation, TEST-NET-2)', '198.51.100.1', '198.51.100.255', '198.51.101.1'],
  ['203.0.113.0/24 (documentation, TEST-NET-3)', '203.0.113.1', '203.0.113.255', '203.0.114.1'],
  ['224.0.0.0/4 (multicast)', '224.0.0.1', '239.255.255.255', '223.255.255.254'],
  ['240.0.0.0/4 (reserved)', '240.0.0.1', '255.255.255.254', null],
  ['255.255.255.255/32 (limited broadcast)', '255.255.255.255', '255.255.255.255', null],
];

const IPV6: Array<[string, string, string, string | null]> = [
  ['::/128 (unspecified)', '::', '::', null],
  ['::1/128 (loopback)', '::1', '::1', null],
  ['64:ff9b:1::/48 (local-use IPv4/IPv6 translation)', '64:ff9b:1::1', '64:ff9b:1:ffff:ffff:ffff:ffff:ffff', '64:ff9b::808:808'],
  ['100::/64 (discard-only)', '100::1', '100::ffff:ffff:ffff:ffff', null],
  ['100:0:0:1::/64 (dummy prefix)', '100:0:0:1::1', '100:0:0:1:ffff:ffff:ffff:ffff', null],
  ['2001::/23 (IETF protocol assignments)', '2001:100::1', '2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', '2001:200::1'],
  ['2001:2::/48 (benchmarking)', '2001:2::1', '2001:2:0:ffff:ffff:ffff:ffff:ffff', null],
  ['2001:10::/28 (ORCHID, deprecated)', '2001:10::1', '2001:1f:ffff:ffff:ffff:ffff:ffff:ffff', null],
  ['2001:db8::/32 (documentation)', '2001:db8::1', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', '2001:db9::1'],
  ['3fff::/20 (documentation)', '3fff::1', '3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', '3fff:1000::1'],
  ['5f00::/16 (segment routing SIDs)', '5f00::1', '5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '5f01::1'],
  ['fc00::/7 (unique local)', 'fc00::1', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'fb00::1'],
  ['fe80::/10 (link-local)', 'fe80::1', 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null],
  ['fec0::/10 (site-local, deprecated)', 'fec0::1', 'feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null],
  ['ff00::/8 (multicast)', 'ff02::1', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null],
];

describe('the special-purpose ranges: refused at both ends, public neighbours taken', () => {
  it.each([...IPV4, ...IPV6])('%s', (_, first, last, outside) => {
    expect(isForbiddenAddress(first), first).toBe(true);
    expect(isForbiddenAddress(last), last).toBe(true);
    if (outside !== null) expect(isForbiddenAddress(outside), outside).toBe(false);
  });

  it('an operator allow list naming a range opens it, as for the other private ranges', () => {
    const parsed = parseFetchAllow(['192.0.2.0/24']);
    if (!('list' in parsed)) throw new Error(parsed.problem);
    const allow = parsed.list;
    expect(addressAllowed('192.0.2.7', allow)).toBe(true);
    expect(addressAllowed('198.51.100.7', allow)).toBe(false);
  });

  it('each range of the table has a case here', () => {
    const named = [...IPV4, ...IPV6].map(([range]) => range.split(' ')[0]);
    for (const family of ['ipv4', 'ipv6'] as const)
      for (const [net, prefix] of FORBIDDEN_RANGES[family]) expect(named, `${net}/${prefix}`).toContain(`${net}/${prefix}`);
  });
});

describe('IPv6 forms that carry an IPv4 host: judged by that host', () => {
  it.each([
    ['IPv4-mapped ::ffff:0:0/96', '::ffff:192.0.2.1', '::ffff:8.8.8.8'],
    ['IPv4-compatible ::/96', '::198.51.100.1', '::8.8.8.8'],
    ['SIIT ::ffff:0:0:0/96', '::ffff:0:203.0.113.1', '::ffff:0:8.8.8.8'],
    ['NAT64 64:ff9b::/96', '64:ff9b::192.88.99.1', '64:ff9b::8.8.8.8'],
    ['6to4 2002::/16', '2002:c000:201::1', '2002:808:808::1'],
    ['6to4 of a benchmarking address', '2002:c612:1::1', '2002:808:404::1'],
    ['Teredo 2001::/32 (server 203.0.113.1)', '2001:0:cb00:7101::f7f7:f7f7', '2001:0:808:808::f7f7:f7f7'],
  ])('%s', (_, refused, taken) => {
    expect(isForbiddenAddress(refused), refused).toBe(true);
    expect(isForbiddenAddress(taken), taken).toBe(false);
  });
});
