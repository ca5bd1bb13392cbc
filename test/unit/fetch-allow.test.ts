/**
 * The operator's allow list of image downloads (BGONE_FETCH_ALLOW, the library's fetchAllow;
 * src/lib/address-guard.ts): its grammar, the rule for each address, the URL's text, names resolved
 * by a real DNS server on 127.0.0.1 (test/helpers/dns-server.ts), and whole downloads from real
 * servers on 127.0.0.1 (src/lib/url-fetch.ts), redirects included. The guard is asked to use the
 * test's DNS server through its own option; nothing is replaced.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  addressAllowed,
  type FetchAllowList,
  hostListed,
  isForbiddenAddress,
  isMetadataAddress,
  METADATA_ADDRESSES,
  parseFetchAllow,
  resolveCheckedAddress,
  urlProblem,
} from '../../src/lib/address-guard.js';
import { type FetchImageOptions, fetchImageUrl, UrlFetchError } from '../../src/lib/url-fetch.js';
import { type DnsServer, startDnsServer } from '../helpers/dns-server.js';

/** The compiled list of `text` (a BGONE_FETCH_ALLOW value); fails the test on a refused one. */
function list(text: string): FetchAllowList {
  const parsed = parseFetchAllow(text);
  if ('problem' in parsed) throw new Error(parsed.problem);
  if (!parsed.list) throw new Error('empty list');
  return parsed.list;
}

/** Why `text` is refused. */
function problem(value: unknown): string {
  const parsed = parseFetchAllow(value);
  if (!('problem' in parsed)) throw new Error(`${JSON.stringify(value)} was accepted`);
  return parsed.problem;
}

describe('the grammar of an allow list', () => {
  it('takes names, *.domain wildcards, IPv4 and IPv6 networks and addresses, normalised', () => {
    expect(
      list(' Images.Example.Internal. , *.Corp.Internal,10.0.0.0/8, 10.1.2.3, 10.1.2.4/32, FD12:3456:0::/48, fd00:ec2::254/128,a_b.internal').entries,
    ).toEqual(['images.example.internal', '*.corp.internal', '10.0.0.0/8', '10.1.2.3', '10.1.2.4', 'fd12:3456::/48', 'fd00:ec2::254', 'a_b.internal']);
    expect(list('::/0, 0.0.0.0/0, ::1, localhost').entries).toEqual(['::/0', '0.0.0.0/0', '::1', 'localhost']);
    expect(parseFetchAllow('')).toEqual({ list: undefined });
    expect(parseFetchAllow('  ')).toEqual({ list: undefined });
    expect(parseFetchAllow([])).toEqual({ list: undefined });
    expect(parseFetchAllow([' 10.0.0.0/8 ', 'A.internal'])).toMatchObject({ list: { entries: ['10.0.0.0/8', 'a.internal'] } });
  });

  it.each([
    ['a,,b', /entry 2 of 3 is empty/],
    ['a,', /entry 2 of 2 is empty/],
    ['10.1.0.0/8', /"10\.1\.0\.0\/8", has bits set past its \/8 prefix \(its network is 10\.0\.0\.0\/8\)/],
    ['fd12::1/16', /has bits set past its \/16 prefix \(its network is fd12::\/16\)/],
    ['10.0.0.0/33', /prefix length that is not a number from 0 to 32/],
    ['fd12::/129', /prefix length that is not a number from 0 to 128/],
    ['10.0.0.0/08', /prefix length that is not a number from 0 to 32/],
    ['10.0.0.0/', /prefix length/],
    ['x.internal/8', /is not an IPv4 or IPv6 address before its \/prefix/],
    ['[fd12::1]', /has brackets/],
    ['fe80::1%eth0', /has a zone index/],
    ['::ffff:10.0.0.1', /carries an IPv4 address.*list the IPv4 address/],
    ['64:ff9b::/96', /carries an IPv4 address/],
    ['2002::/16', /carries an IPv4 address/],
    ['images.internal:8080', /is not a host name/],
    ['https://images.internal', /is not a host name|before its \/prefix/],
    ['-bad.internal', /is not a host name/],
    ['bücher.example', /is not ASCII.*punycode/],
    ['10.1', /is neither an address nor a host name/],
    ['images.0x7f', /is neither an address nor a host name/],
    ['*', /has a \* elsewhere/],
    ['a*.internal', /has a \* elsewhere/],
    ['*.*.internal', /has a \* elsewhere/],
    ['*.', /is empty/],
  ])('refuses %j, naming the entry and why', (text, why) => {
    expect(problem(text)).toMatch(why);
  });

  it('refuses a value that is not a list of strings', () => {
    expect(problem(7)).toMatch(/not a list/);
    expect(problem(['10.0.0.0/8', 7])).toMatch(/entry 2 of 2 is not a string/);
  });
});

describe('the rule for an address', () => {
  it('without a list: every forbidden range refused, Azure WireServer among the metadata addresses, public ones taken', () => {
    for (const a of ['10.1.2.3', '127.0.0.1', '::1', '169.254.169.254', '168.63.129.16', 'fd20:ce::254', '::ffff:168.63.129.16'])
      expect(isForbiddenAddress(a), a).toBe(true);
    for (const a of ['93.184.216.34', '168.63.129.17', '2606:4700::1111']) expect(isForbiddenAddress(a), a).toBe(false);
    expect(METADATA_ADDRESSES.every(isMetadataAddress)).toBe(true);
    expect(isMetadataAddress('::ffff:169.254.169.254')).toBe(true);
    expect(isMetadataAddress('fd00:ec2:0:0::254')).toBe(true);
    expect(isMetadataAddress('169.254.169.253')).toBe(false);
  });

  it('a listed network opens its addresses, in every IPv6 form that carries them, and nothing else', () => {
    const allow = list('10.0.0.0/8, fd12:3456::/48');
    for (const a of ['10.1.2.3', '10.255.255.255', '::ffff:10.1.2.3', '::ffff:a01:203', '2002:a01:203::1', '64:ff9b::10.1.2.3', 'fd12:3456:0:1::9'])
      expect(addressAllowed(a, allow), a).toBe(true);
    for (const a of ['192.168.1.1', '127.0.0.1', '172.16.0.1', 'fd12:3456:1::9', '::1', '::ffff:192.168.1.1']) expect(addressAllowed(a, allow), a).toBe(false);
    // A Teredo address leads to two IPv4 hosts: both must be allowed.
    expect(addressAllowed('2001:0:a01:203::f5fe:fdfc', allow), 'Teredo to 10.1.2.3 via 10.1.2.3').toBe(true);
    expect(addressAllowed('2001:0:a01:203::3f57:fefe', allow), 'Teredo to 192.168.1.1').toBe(false);
    expect(addressAllowed('8.8.8.8', allow)).toBe(true);
  });

  it('loopback is opened by its own networks: 127.0.0.0/8 for IPv4, ::1 for IPv6', () => {
    expect(addressAllowed('127.0.0.1', list('127.0.0.0/8'))).toBe(true);
    expect(addressAllowed('::1', list('127.0.0.0/8'))).toBe(false);
    expect(addressAllowed('::1', list('::1'))).toBe(true);
    expect(addressAllowed('127.0.0.1', list('::1'))).toBe(false);
  });

  it('metadata addresses stay refused inside a listed network and behind a listed name, unless listed exactly', () => {
    const wide = list('169.254.0.0/16, 100.64.0.0/10, 192.0.0.0/24, fc00::/7, fe80::/10, 0.0.0.0/0, ::/0');
    for (const a of METADATA_ADDRESSES) {
      expect(addressAllowed(a, wide), a).toBe(false);
      expect(addressAllowed(a, wide, true), `${a} behind a listed name`).toBe(false);
      expect(addressAllowed(a, list(a)), `${a} listed as an address`).toBe(true);
      expect(addressAllowed(a, list(`${a}/${a.includes(':') ? 128 : 32}`)), `${a} listed as a /32 or /128`).toBe(true);
    }
    expect(addressAllowed('::ffff:169.254.169.254', wide)).toBe(false);
    expect(addressAllowed('::ffff:169.254.169.254', list('169.254.169.254'))).toBe(true);
    expect(addressAllowed('169.254.169.254', list('169.254.169.254/31'))).toBe(false);
    expect(addressAllowed('169.254.169.255', list('169.254.169.254/31'))).toBe(true);
    expect(addressAllowed('169.254.1.1', wide)).toBe(true);
    // Listing one metadata address opens that one only.
    expect(addressAllowed('169.254.170.2', list('169.254.169.254'), true)).toBe(false);
  });

  it('a listed name opens the private ranges for its answers, not the metadata addresses', () => {
    const allow = list('images.internal');
    for (const a of ['10.1.2.3', '127.0.0.1', '::1', 'fd12::1', '192.168.0.7']) expect(addressAllowed(a, allow, true), a).toBe(true);
    for (const a of ['10.1.2.3', '127.0.0.1']) expect(addressAllowed(a, allow, false), a).toBe(false);
    expect(addressAllowed('169.254.169.254', allow, true)).toBe(false);
    expect(addressAllowed('64:ff9b:1::a01:203', allow, true), 'local-use NAT64 is refused outright').toBe(false);
  });

  it('names: exact (case and a trailing dot aside), or every name under a wildcard, never the wildcard domain itself', () => {
    const allow = list('images.internal, *.corp.internal');
    expect(['images.internal', 'IMAGES.internal', 'a.corp.internal', 'a.b.corp.internal'].map((h) => hostListed(allow, h))).toEqual([true, true, true, true]);
    expect(['x.images.internal', 'corp.internal', 'acorp.internal', 'images.internal.evil', '10.1.2.3'].map((h) => hostListed(allow, h))).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(hostListed(undefined, 'images.internal')).toBe(false);
    expect(hostListed(list('10.1.2.3'), '10.1.2.3')).toBe(false);
  });
});

describe("a URL's text", () => {
  const rules = (allow: string) => ({ allowPrivate: false, schemes: ['http:', 'https:'], allow: list(allow) });

  it('localhost is refused unless listed by name; an address literal is judged by the networks alone', () => {
    expect(urlProblem('http://localhost:8080/a.png', rules('127.0.0.0/8'))?.reason).toBe('blocked_address');
    expect(urlProblem('http://localhost:8080/a.png', rules('localhost'))).toBeNull();
    expect(urlProblem('http://localhost.:8080/a.png', rules('localhost'))).toBeNull();
    expect(urlProblem('http://img.localhost/a.png', rules('localhost'))?.reason).toBe('blocked_address');
    expect(urlProblem('http://img.localhost/a.png', rules('*.localhost'))).toBeNull();
    expect(urlProblem('http://127.0.0.1:8080/a.png', rules('localhost'))?.reason).toBe('blocked_address');
    expect(urlProblem('http://127.0.0.1:8080/a.png', rules('127.0.0.0/8'))).toBeNull();
    expect(urlProblem('http://[::1]:8080/a.png', rules('127.0.0.0/8'))?.reason).toBe('blocked_address');
    expect(urlProblem('http://[::1]:8080/a.png', rules('::1'))).toBeNull();
    expect(urlProblem('http://2130706433/a.png', rules('127.0.0.0/8')), 'the URL parser reads the number as 127.0.0.1').toBeNull();
  });

  it('a metadata address is refused inside a listed network, and taken when listed exactly', () => {
    expect(urlProblem('http://169.254.169.254/latest/meta-data/', rules('169.254.0.0/16'))?.reason).toBe('blocked_address');
    expect(urlProblem('http://[::ffff:a9fe:a9fe]/latest/meta-data/', rules('169.254.0.0/16'))?.reason).toBe('blocked_address');
    expect(urlProblem('http://[fd00:ec2::254]/latest/meta-data/', rules('fd00::/8'))?.reason).toBe('blocked_address');
    expect(urlProblem('http://169.254.169.254/latest/meta-data/', rules('169.254.169.254'))).toBeNull();
    expect(urlProblem('http://[fd00:ec2::254]/latest/meta-data/', rules('fd00:ec2::254/128'))).toBeNull();
  });

  it('allowPrivate still lifts every address rule, metadata included', () => {
    expect(urlProblem('http://169.254.169.254/', { allowPrivate: true, schemes: ['http:'] })).toBeNull();
    expect(urlProblem('http://localhost/', { allowPrivate: true, schemes: ['http:'] })).toBeNull();
  });
});

describe('names resolved (a real DNS server on 127.0.0.1)', () => {
  let dns: DnsServer;
  beforeAll(async () => {
    dns = await startDnsServer({
      'images.bgone.test': { a: ['10.0.0.5'] },
      'other.bgone.test': { a: ['10.0.0.5'] },
      'lan.bgone.test': { a: ['192.168.7.7'] },
      'dual.bgone.test': { a: ['10.0.0.5'], aaaa: ['fd12::5'] },
      'meta.bgone.test': { a: ['169.254.169.254'] },
      'half-meta.bgone.test': { a: ['10.0.0.5', '169.254.169.254'] },
      'mapped-meta.bgone.test': { aaaa: ['::ffff:a9fe:a9fe'] },
      'a.corp.bgone.test': { a: ['10.0.0.6'] },
      'corp.bgone.test': { a: ['10.0.0.7'] },
      'public.bgone.test': { a: ['93.184.216.34'] },
    });
  });
  afterAll(() => dns.close());
  const resolve = (host: string, allow: string) => resolveCheckedAddress(host, false, { dnsServers: [dns.address], allow: list(allow) });
  const blocked = /resolves to a loopback, private, link-local or metadata address/;

  it('a listed name may resolve to private addresses; the same answers behind an unlisted name are refused', async () => {
    await expect(resolve('images.bgone.test', 'images.bgone.test')).resolves.toEqual({ address: '10.0.0.5', family: 4 });
    await expect(resolve('IMAGES.bgone.test', 'images.bgone.test')).resolves.toEqual({ address: '10.0.0.5', family: 4 });
    await expect(resolve('dual.bgone.test', 'dual.bgone.test')).resolves.toEqual({ address: '10.0.0.5', family: 4 });
    await expect(resolve('other.bgone.test', 'images.bgone.test')).rejects.toThrow(blocked);
    await expect(resolve('public.bgone.test', 'images.bgone.test')).resolves.toEqual({ address: '93.184.216.34', family: 4 });
  });

  it('an unlisted name is taken when every answer lies in a listed network', async () => {
    await expect(resolve('other.bgone.test', '10.0.0.0/24')).resolves.toEqual({ address: '10.0.0.5', family: 4 });
    await expect(resolve('lan.bgone.test', '10.0.0.0/24')).rejects.toThrow(blocked);
    // Every answer is checked: the IPv6 one is outside the list.
    await expect(resolve('dual.bgone.test', '10.0.0.0/24')).rejects.toThrow(blocked);
    await expect(resolve('dual.bgone.test', '10.0.0.0/24, fd12::/16')).resolves.toEqual({ address: '10.0.0.5', family: 4 });
  });

  it('a wildcard opens the names under its domain, not the domain', async () => {
    await expect(resolve('a.corp.bgone.test', '*.corp.bgone.test')).resolves.toEqual({ address: '10.0.0.6', family: 4 });
    await expect(resolve('corp.bgone.test', '*.corp.bgone.test')).rejects.toThrow(blocked);
  });

  it('a listed name that resolves to a metadata address, among its answers or carried in IPv6, is refused unless that address is listed', async () => {
    await expect(resolve('meta.bgone.test', 'meta.bgone.test')).rejects.toThrow(blocked);
    await expect(resolve('meta.bgone.test', 'meta.bgone.test, 169.254.0.0/16')).rejects.toThrow(blocked);
    await expect(resolve('half-meta.bgone.test', 'half-meta.bgone.test')).rejects.toThrow(blocked);
    await expect(resolve('mapped-meta.bgone.test', 'mapped-meta.bgone.test')).rejects.toThrow(blocked);
    await expect(resolve('meta.bgone.test', 'meta.bgone.test, 169.254.169.254')).resolves.toEqual({ address: '169.254.169.254', family: 4 });
    await expect(resolve('meta.bgone.test', '169.254.169.254/32')).resolves.toEqual({ address: '169.254.169.254', family: 4 });
  });

  it('localhost: refused before any query unless listed by name; listed, the system resolves it (DNS does not)', async () => {
    const before = dns.queries.length;
    await expect(resolve('localhost', '127.0.0.0/8')).rejects.toThrow(/this machine/);
    expect(dns.queries.length).toBe(before);
    await expect(resolve('localhost', 'localhost')).resolves.toEqual({ address: '127.0.0.1', family: 4 });
    // An unlisted name DNS does not know is not looked up by the system.
    await expect(resolve('unknown.bgone.test', '10.0.0.0/8')).rejects.toThrow(/does not resolve/);
  });
});

interface PhotoServer {
  url: string;
  port: number;
  /** Paths requested, in order. */
  paths: string[];
  close(): Promise<void>;
}

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(2000, 7)]);
const photoServers: PhotoServer[] = [];

/** A server on 127.0.0.1 answering /a.png with a PNG, /to?<url> with a 302 to that URL, anything else 404. */
async function photoServer(): Promise<PhotoServer> {
  const paths: string[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    paths.push(req.url!);
    if (req.url === '/a.png') {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length });
      res.end(PNG);
    } else if (req.url!.startsWith('/to?')) {
      res.writeHead(302, { location: decodeURIComponent(req.url!.slice(4)) });
      res.end();
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const s: PhotoServer = {
    url: `http://127.0.0.1:${port}`,
    port,
    paths,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  photoServers.push(s);
  return s;
}

describe('a download through the list (real servers on 127.0.0.1)', () => {
  let dns: DnsServer;
  beforeAll(async () => {
    dns = await startDnsServer({
      'images.bgone.test': { a: ['127.0.0.1'] },
      'cdn.bgone.test': { a: ['127.0.0.1'] },
      'elsewhere.bgone.test': { a: ['127.0.0.1'] },
    });
  });
  afterAll(() => dns.close());
  afterEach(async () => {
    await Promise.all(photoServers.splice(0).map((s) => s.close()));
  });

  const download = (url: string, allow: string, extra: Partial<FetchImageOptions> = {}) =>
    fetchImageUrl(url, { allowPrivate: false, allow: list(allow), dnsServers: [dns.address], ...extra });
  async function failure(url: string, allow: string): Promise<UrlFetchError> {
    const err = await download(url, allow).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(UrlFetchError);
    return err as UrlFetchError;
  }

  it('downloads from a listed name and from an address in a listed network; refuses both otherwise, without connecting', async () => {
    const s = await photoServer();
    expect((await download(`http://images.bgone.test:${s.port}/a.png`, 'images.bgone.test')).equals(PNG)).toBe(true);
    expect((await download(`http://elsewhere.bgone.test:${s.port}/a.png`, '127.0.0.0/8')).equals(PNG)).toBe(true);
    expect((await download(`${s.url}/a.png`, '127.0.0.1')).equals(PNG)).toBe(true);
    expect(s.paths).toEqual(['/a.png', '/a.png', '/a.png']);
    for (const [url, allow] of [
      [`http://elsewhere.bgone.test:${s.port}/a.png`, 'images.bgone.test'],
      [`${s.url}/a.png`, 'images.bgone.test'],
      [`http://images.bgone.test:${s.port}/a.png`, '10.0.0.0/8'],
    ] as const) {
      const err = await failure(url, allow);
      expect({ kind: err.kind, reason: err.reason }, url).toEqual({ kind: 'download_failed', reason: 'blocked_address' });
    }
    expect(s.paths).toHaveLength(3);
  });

  it('a redirect is judged by its own host: a listed host does not lend its place to the next one', async () => {
    const s = await photoServer();
    const to = (url: string) => `/to?${encodeURIComponent(url)}`;
    // Listed → unlisted name, and listed → an address outside the list: refused before connecting again.
    let err = await failure(`http://images.bgone.test:${s.port}${to(`http://elsewhere.bgone.test:${s.port}/a.png`)}`, 'images.bgone.test');
    expect(err.reason).toBe('blocked_address');
    err = await failure(`http://images.bgone.test:${s.port}${to(`${s.url}/a.png`)}`, 'images.bgone.test');
    expect(err.reason).toBe('blocked_address');
    // To a metadata address inside a listed network.
    err = await failure(`http://images.bgone.test:${s.port}${to('http://169.254.169.254/latest/meta-data/')}`, 'images.bgone.test, 169.254.0.0/16');
    expect(err.reason).toBe('blocked_address');
    expect(s.paths.filter((p) => p === '/a.png')).toEqual([]);
    // Listed → listed: followed.
    const got = await download(`http://images.bgone.test:${s.port}${to(`http://cdn.bgone.test:${s.port}/a.png`)}`, 'images.bgone.test, cdn.bgone.test');
    expect(got.equals(PNG)).toBe(true);
    expect(s.paths.at(-1)).toBe('/a.png');
  });

  it('localhost downloads once listed by name', async () => {
    const s = await photoServer();
    expect((await download(`http://localhost:${s.port}/a.png`, 'localhost')).equals(PNG)).toBe(true);
    expect((await failure(`http://localhost:${s.port}/a.png`, '127.0.0.0/8')).reason).toBe('blocked_address');
  });
});
