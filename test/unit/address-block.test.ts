/**
 * The block a per-address limit counts (src/dashboard/address-block.ts): an IPv4 address alone, an
 * IPv6 address by its /64 whatever its spelling, an IPv4-mapped IPv6 address as its IPv4 address.
 */
import { describe, expect, it } from 'vitest';
import { addressBlock } from '../../src/dashboard/address-block.js';

describe('addressBlock', () => {
  it('keeps an IPv4 address as it is', () => {
    expect(addressBlock('203.0.113.7')).toBe('203.0.113.7');
    expect(addressBlock('203.0.113.8')).toBe('203.0.113.8');
  });

  it('counts every address of one IPv6 /64 as one block, and another /64 apart', () => {
    const block = '2001:db8:1:2::/64';
    for (const address of ['2001:db8:1:2::1', '2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0DB8:0001:0002:0:0:0:9', '2001:db8:1:2:a::b', '[2001:db8:1:2::7]']) {
      expect(addressBlock(address), address).toBe(block);
    }
    expect(addressBlock('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressBlock('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressBlock('::1')).toBe('0:0:0:0::/64');
    expect(addressBlock('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressBlock('64:ff9b::192.0.2.1')).toBe('64:ff9b:0:0::/64');
  });

  it('reads an IPv4-mapped IPv6 address (a dual-stack socket) as its IPv4 address', () => {
    expect(addressBlock('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressBlock('::FFFF:cb00:7107')).toBe('203.0.113.7');
    expect(addressBlock('0:0:0:0:0:ffff:203.0.113.7')).toBe('203.0.113.7');
  });

  it('returns anything else unchanged', () => {
    expect(addressBlock('')).toBe('');
    expect(addressBlock('unknown')).toBe('unknown');
    expect(addressBlock('2001:db8::g')).toBe('2001:db8::g');
  });
});
