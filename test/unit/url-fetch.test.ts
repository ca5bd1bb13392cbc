/**
 * Downloading an image by URL (src/lib/url-fetch.ts) from real servers on 127.0.0.1, names
 * resolved by a real DNS server on 127.0.0.1 (test/helpers/dns-server.ts). The address guard is
 * the library's own; the only stand-in is which DNS server it asks (the test's), and, where a test
 * needs a first hop that passes the guard, one answer of the guard that lets that hop through while
 * every later hop meets the real guard.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveCheckedAddress } from '../../src/lib/address-guard.js';
import { BgoneError, ERROR_STATUS } from '../../src/lib/errors.js';
import { type FetchImageOptions, fetchImageUrl, toBgoneError, UrlFetchError } from '../../src/lib/url-fetch.js';
import { type DnsServer, startDnsServer } from '../helpers/dns-server.js';

const dns = vi.hoisted(() => ({ servers: [] as string[] }));

// The real guard, asking the test's DNS server instead of the system's.
vi.mock('../../src/lib/address-guard.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/lib/address-guard.js')>();
  return {
    ...real,
    resolveCheckedAddress: vi.fn((host: string, allowPrivate: boolean, options: Parameters<typeof real.resolveCheckedAddress>[2] = {}) =>
      real.resolveCheckedAddress(host, allowPrivate, { ...options, dnsServers: dns.servers }),
    ),
  };
});

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(200_000)]);
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), randomBytes(100)]);
const WEBP = Buffer.concat([Buffer.from('RIFF'), Buffer.from([0x10, 0, 0, 0]), Buffer.from('WEBPVP8 '), randomBytes(100)]);

interface TestServer {
  url: string;
  port: number;
  /** Requests seen, with their headers. */
  requests: http.IncomingMessage[];
  /** Resolves once every connection the server accepted is closed. */
  allClosed(): Promise<void>;
  close(): Promise<void>;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const servers: TestServer[] = [];

async function serve(handler: Handler): Promise<TestServer> {
  const requests: http.IncomingMessage[] = [];
  const sockets = new Set<Socket>();
  const closed: Promise<void>[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req);
    handler(req, res);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    closed.push(new Promise((resolve) => socket.on('close', () => resolve())));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const s: TestServer = {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    allClosed: async () => {
      await Promise.all(closed);
    },
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  servers.push(s);
  return s;
}

const sendPng: Handler = (_req, res) => {
  res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length });
  res.end(PNG);
};

/** The UrlFetchError a download fails with. */
async function failure(url: string, options: Partial<FetchImageOptions> = {}): Promise<UrlFetchError> {
  try {
    await fetchImageUrl(url, { allowPrivate: true, ...options });
  } catch (err) {
    expect(err).toBeInstanceOf(UrlFetchError);
    return err as UrlFetchError;
  }
  throw new Error(`${url} was downloaded`);
}

/** Rejects after `ms`: a closed connection is seen well within it, or the test fails. */
function within<T>(promise: Promise<T>, ms = 2000): Promise<T> {
  return Promise.race([promise, new Promise<T>((_resolve, reject) => setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms))]);
}

let dnsServer: DnsServer;
beforeAll(async () => {
  dnsServer = await startDnsServer({
    'loop.bgone.test': { a: ['127.0.0.1'] },
    'img.bgone.test': { a: ['127.0.0.1'] },
    'metadata.bgone.test': { a: ['169.254.169.254'] },
    'mapped.bgone.test': { aaaa: ['::ffff:10.0.0.1'] },
    'public.bgone.test': { a: ['93.184.216.34'] },
  });
  dns.servers = [dnsServer.address];
});
afterAll(() => dnsServer.close());
afterEach(async () => {
  vi.mocked(resolveCheckedAddress).mockClear();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe('fetchImageUrl: a download', () => {
  it('returns the exact bytes of a PNG, a JPEG and a WebP file, and counts them as they come', async () => {
    const files: Record<string, Buffer> = { '/a.png': PNG, '/b.jpg': JPEG, '/c.webp': WEBP };
    const s = await serve((req, res) => {
      // The Content-Type is not what decides.
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(files[req.url!]);
    });
    const counts: number[] = [];
    const got = await fetchImageUrl(`${s.url}/a.png`, { allowPrivate: true, onBytes: (n) => counts.push(n) });
    expect(got.equals(PNG)).toBe(true);
    expect(counts.at(-1)).toBe(PNG.length);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect((await fetchImageUrl(`${s.url}/b.jpg`, { allowPrivate: true })).equals(JPEG)).toBe(true);
    expect((await fetchImageUrl(`${s.url}/c.webp`, { allowPrivate: true })).equals(WEBP)).toBe(true);
  });

  it('sends User-Agent: bgone and Accept-Encoding: identity, and no cookie or credentials', async () => {
    const s = await serve(sendPng);
    await fetchImageUrl(`${s.url}/x.png?size=1`, { allowPrivate: true });
    const [req] = s.requests;
    expect(req!.method).toBe('GET');
    expect(req!.url).toBe('/x.png?size=1');
    expect(req!.headers['user-agent']).toBe('bgone');
    expect(req!.headers['accept-encoding']).toBe('identity');
    expect(req!.headers.cookie).toBeUndefined();
    expect(req!.headers.authorization).toBeUndefined();
    expect(req!.headers.host).toBe(`127.0.0.1:${s.port}`);
  });

  it('a status other than 200 fails with the status, without the body in the message', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('secret internal page');
    });
    const err = await failure(`${s.url}/missing.png`);
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'status', status: 404 });
    expect(err.message).toBe('The image URL answered HTTP 404.');
    const e500 = await serve((_req, res) => res.writeHead(500).end());
    expect(await failure(`${e500.url}/`)).toMatchObject({ reason: 'status', status: 500 });
  });

  it.each([206, 203, 204])('HTTP %s fails with the status, whatever its body: only a 200 answer is the whole image', async (code) => {
    const s = await serve((_req, res) => {
      const range = code === 206 ? { 'content-range': `bytes 0-${PNG.length - 1}/${PNG.length * 2}` } : {};
      res.writeHead(code, { 'content-type': 'image/png', ...range });
      res.end(code === 204 ? undefined : PNG);
    });
    const err = await failure(`${s.url}/x.png`);
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'status', status: code });
    expect(err.message).toBe(`The image URL answered HTTP ${code}.`);
  });

  it('a body that is not JPEG, PNG or WebP fails as not_image (an HTML page, a short body); an empty one as empty', async () => {
    const s = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      if (req.url === '/html') res.end(`<!doctype html><html><body>${'x'.repeat(100_000)}</body></html>`);
      else if (req.url === '/short') res.end('GIF');
      else res.end();
    });
    expect(await failure(`${s.url}/html`)).toMatchObject({ kind: 'download_failed', reason: 'not_image' });
    expect(await failure(`${s.url}/short`)).toMatchObject({ kind: 'download_failed', reason: 'not_image' });
    expect(await failure(`${s.url}/empty`)).toMatchObject({ kind: 'download_failed', reason: 'empty' });
  });

  it('refuses a compressed body (Content-Encoding: gzip), whatever it holds', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png', 'content-encoding': 'gzip' });
      res.end(gzipSync(PNG));
    });
    expect(await failure(`${s.url}/bomb.png`)).toMatchObject({ kind: 'download_failed', reason: 'encoding' });
  });

  it('a host that does not resolve fails as dns; a port nobody listens on as connection', async () => {
    expect(await failure('http://unknown.bgone.test/x.png', { allowPrivate: false })).toMatchObject({ kind: 'download_failed', reason: 'dns' });
    const s = await serve(sendPng);
    const port = s.port;
    await s.close();
    servers.splice(0);
    const err = await failure(`http://127.0.0.1:${port}/x.png`);
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'connection' });
    expect(err.message).toMatch(/ECONNREFUSED/);
  });
});

describe('fetchImageUrl: the URL text (invalid_url)', () => {
  it.each([
    ['ftp://example.com/a.png', 'scheme'],
    ['file:///etc/passwd', 'scheme'],
    ['javascript:alert(1)', 'scheme'],
    ['http://user:pass@example.com/a.png', 'credentials'],
    ['https://user@example.com/a.png', 'credentials'],
    ['not a url', 'malformed'],
    ['/relative/a.png', 'malformed'],
    ['http://example.com/a\r\nX-Injected: 1', 'malformed'],
    ['http://example.com/a\u0000.png', 'malformed'],
    [`https://example.com/${'a'.repeat(3000)}`, 'too_long'],
  ])('%.60j: %s', async (url, reason) => {
    const err = await failure(url, { allowPrivate: false });
    expect(err).toMatchObject({ kind: 'invalid_url', reason });
    expect(err.message).toMatch(/^The image URL .+\.$/);
    expect(resolveCheckedAddress).not.toHaveBeenCalled();
  });

  it('accepts 2048 characters', async () => {
    const s = await serve(sendPng);
    const url = `${s.url}/`;
    expect((await fetchImageUrl(url + 'a'.repeat(2048 - url.length), { allowPrivate: true })).equals(PNG)).toBe(true);
    expect(await failure(url + 'a'.repeat(2049 - url.length))).toMatchObject({ kind: 'invalid_url', reason: 'too_long' });
  });
});

describe('fetchImageUrl: forbidden addresses (download_failed, blocked_address)', () => {
  // One rule, however the address is reached: an IP literal, localhost, a name that resolves to
  // one, a redirect. The URL's text is fine; where it leads is refused.
  it.each([
    'http://127.0.0.1:PORT/x.png',
    'http://localhost:PORT/x.png',
    'http://sub.localhost:PORT/x.png',
    'http://10.0.0.1/x.png',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::1]:PORT/x.png',
    'http://[::ffff:127.0.0.1]:PORT/x.png',
    'http://2130706433:PORT/x.png', // 127.0.0.1 as one number, which the URL parser normalises
    'http://loop.bgone.test:PORT/x.png',
    'http://loop.bgone.test.:PORT/x.png',
    'http://metadata.bgone.test/x.png',
    'http://mapped.bgone.test/x.png',
  ])('%s is refused without allowPrivate, and nothing is sent', async (template) => {
    const s = await serve(sendPng);
    const err = await failure(template.replace('PORT', String(s.port)), { allowPrivate: false });
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'blocked_address' });
    expect(err.message).toBe('The image URL leads to a loopback, private, link-local or metadata address.');
    expect(s.requests).toHaveLength(0);
  });

  it('allowPrivate lifts the rule: 127.0.0.1 and a name resolving to it are downloaded', async () => {
    const s = await serve(sendPng);
    expect((await fetchImageUrl(`${s.url}/x.png`, { allowPrivate: true })).equals(PNG)).toBe(true);
    expect((await fetchImageUrl(`http://loop.bgone.test:${s.port}/x.png`, { allowPrivate: true })).equals(PNG)).toBe(true);
    expect(s.requests.map((r) => r.headers.host)).toEqual([`127.0.0.1:${s.port}`, `loop.bgone.test:${s.port}`]);
  });
});

describe('fetchImageUrl: redirects', () => {
  /** A server that redirects /r/N to /r/N-1 and serves the PNG at /r/0. */
  const chain: Handler = (req, res) => {
    const n = Number(req.url!.split('/')[2]);
    if (n === 0) return sendPng(req, res);
    res.writeHead([301, 302, 303, 307, 308][n % 5]!, { location: `/r/${n - 1}` });
    res.end('moved');
  };

  it('follows up to maxRedirects (301, 302, 303, 307, 308), each Location against the current URL', async () => {
    const s = await serve(chain);
    expect((await fetchImageUrl(`${s.url}/r/1`, { allowPrivate: true })).equals(PNG)).toBe(true);
    expect((await fetchImageUrl(`${s.url}/r/3`, { allowPrivate: true })).equals(PNG)).toBe(true);
    expect((await fetchImageUrl(`${s.url}/r/5`, { allowPrivate: true, maxRedirects: 5 })).equals(PNG)).toBe(true);
    expect(s.requests.map((r) => r.url).slice(0, 6)).toEqual(['/r/1', '/r/0', '/r/3', '/r/2', '/r/1', '/r/0']);
  });

  it('a 4th redirect fails as too_many_redirects, without asking for it', async () => {
    const s = await serve(chain);
    expect(await failure(`${s.url}/r/4`)).toMatchObject({ kind: 'download_failed', reason: 'too_many_redirects' });
    expect(s.requests.map((r) => r.url)).toEqual(['/r/4', '/r/3', '/r/2', '/r/1']);
    expect(await failure(`${s.url}/r/1`, { maxRedirects: 0 })).toMatchObject({ reason: 'too_many_redirects' });
  });

  it('a Location is checked as the first URL is: scheme, credentials', async () => {
    const s = await serve((req, res) => {
      res.writeHead(302, { location: req.url === '/ftp' ? 'ftp://example.com/a.png' : `http://user:pw@127.0.0.1:${s.port}/a.png` });
      res.end();
    });
    const ftp = await failure(`${s.url}/ftp`);
    expect(ftp).toMatchObject({ kind: 'invalid_url', reason: 'scheme' });
    expect(ftp.message).toBe('The image URL redirected to a URL that must start with http:// or https://.');
    expect(await failure(`${s.url}/creds`)).toMatchObject({ kind: 'invalid_url', reason: 'credentials' });
    expect(s.requests.map((r) => r.url)).toEqual(['/ftp', '/creds']);
  });

  // The first hop goes to 127.0.0.1, which the guard refuses without allowPrivate: the guard's
  // first answer is replaced by "public.bgone.test is 127.0.0.1, allowed" (the stand-in for a
  // public host), and every later hop meets the real guard with allowPrivate false.
  it.each([
    ['an IP literal', 'http://127.0.0.1:TARGET/x.png'],
    ['localhost', 'http://localhost:TARGET/x.png'],
    ['the metadata address', 'http://169.254.169.254/latest/meta-data/'],
    ['a name resolving to 127.0.0.1', 'http://loop.bgone.test:TARGET/x.png'],
  ])('a redirect to %s is refused although the first hop was allowed', async (_what, location) => {
    const target = await serve(sendPng);
    const first = await serve((_req, res) => {
      res.writeHead(302, { location: location.replace('TARGET', String(target.port)) });
      res.end();
    });
    vi.mocked(resolveCheckedAddress).mockImplementationOnce(async (host, allowPrivate) => {
      expect([host, allowPrivate]).toEqual(['public.bgone.test', false]);
      return { address: '127.0.0.1', family: 4 };
    });
    const err = await failure(`http://public.bgone.test:${first.port}/x.png`, { allowPrivate: false });
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'blocked_address' });
    expect(first.requests).toHaveLength(1);
    expect(target.requests).toHaveLength(0);
    for (const [, allowPrivate] of vi.mocked(resolveCheckedAddress).mock.calls) expect(allowPrivate).toBe(false);
  });
});

describe('fetchImageUrl: size', () => {
  it('an endless body fails as too_large at maxBytes, and the download stops there', async () => {
    let written = 0;
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      const chunk = Buffer.concat([PNG.subarray(0, 8), randomBytes(64 * 1024 - 8)]);
      const pump = () => {
        while (!res.destroyed && res.write(chunk)) written += chunk.length;
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const counts: number[] = [];
    const err = await failure(`${s.url}/endless.png`, { maxBytes: 300_000, onBytes: (n) => counts.push(n) });
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'too_large' });
    expect(err.message).toBe('The image at the URL is larger than 300000 bytes.');
    expect(Math.max(...counts)).toBeLessThanOrEqual(300_000);
    await within(s.allClosed());
    // Stopped early: what the socket buffers took, not a stream without end.
    expect(written).toBeLessThan(20 * 1024 * 1024);
  });

  it('a Content-Length above maxBytes fails before the body is read; exactly maxBytes passes', async () => {
    const s = await serve((req, res) => {
      if (req.url === '/exact') return sendPng(req, res);
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': 50 * 1024 * 1024 });
      res.write(PNG.subarray(0, 8)); // and never more
    });
    const counts: number[] = [];
    const started = Date.now();
    const err = await failure(`${s.url}/big`, { onBytes: (n) => counts.push(n) });
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'too_large' });
    expect(err.message).toBe('The image at the URL is larger than 20 MB.');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(counts).toEqual([]);
    await within(s.allClosed());
    expect((await fetchImageUrl(`${s.url}/exact`, { allowPrivate: true, maxBytes: PNG.length })).equals(PNG)).toBe(true);
  });
});

// A download that the deadline fails to stop would hang its test: each fails after 5 s instead.
describe('fetchImageUrl: the deadline and cancelling', { timeout: 5000 }, () => {
  it('a server that never answers fails as timeout at timeoutMs, and its connection is closed', async () => {
    const s = await serve(() => {});
    const started = Date.now();
    const err = await failure(`${s.url}/hang.png`, { timeoutMs: 300 });
    const took = Date.now() - started;
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'timeout' });
    expect(err.message).toBe('The image download did not finish within 0.3 s.');
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(1500);
    expect(s.requests).toHaveLength(1);
    await within(s.allClosed());
  });

  it('a body that trickles fails at timeoutMs: the deadline covers the whole download', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.write(PNG.subarray(0, 16));
      const timer = setInterval(() => res.write(PNG.subarray(16, 17)), 50);
      res.on('close', () => clearInterval(timer));
    });
    const started = Date.now();
    expect(await failure(`${s.url}/slow.png`, { timeoutMs: 300 })).toMatchObject({ kind: 'download_failed', reason: 'timeout' });
    expect(Date.now() - started).toBeLessThan(1500);
    await within(s.allClosed());
  });

  it('redirects count against the same deadline', async () => {
    const s = await serve((req, res) => {
      // Each hop takes 150 ms: the third is past the 300 ms deadline.
      setTimeout(() => {
        if (req.url === '/2') return sendPng(req, res);
        res.writeHead(302, { location: `/${Number(req.url!.slice(1)) + 1}` }).end();
      }, 150);
    });
    expect(await failure(`${s.url}/0`, { timeoutMs: 300 })).toMatchObject({ reason: 'timeout' });
  });

  it('a name whose DNS server never answers fails at timeoutMs too', async () => {
    dnsServer.records.set('hang.bgone.test', { hang: true });
    expect(await failure('http://hang.bgone.test/x.png', { timeoutMs: 300, allowPrivate: false })).toMatchObject({ reason: 'timeout' });
  });

  it("the caller's signal cancels: aborted, and the connection is closed", async () => {
    const s = await serve(() => {});
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const err = await failure(`${s.url}/hang.png`, { signal: controller.signal });
    expect(err).toMatchObject({ kind: 'download_failed', reason: 'aborted' });
    await within(s.allClosed());
    expect(await failure(`${s.url}/x.png`, { signal: AbortSignal.abort() })).toMatchObject({ reason: 'aborted' });
    expect(s.requests).toHaveLength(1);
  });
});

describe('fetchImageUrl: https', () => {
  let dir: string | undefined;
  let tls: { key: Buffer; cert: Buffer } | undefined;
  beforeAll(() => {
    // A self-signed certificate for img.bgone.test, made here (skipped where openssl is missing).
    try {
      dir = mkdtempSync(join(tmpdir(), 'bgone-url-fetch-'));
      const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=img.bgone.test'];
      args.push('-addext', 'subjectAltName=DNS:img.bgone.test', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'));
      execFileSync('openssl', args, { stdio: 'pipe' });
      tls = { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
    } catch {
      tls = undefined;
    }
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('sends the host name as SNI and checks the certificate: a self-signed one fails as connection', async (ctx) => {
    if (!tls) return ctx.skip();
    const names: string[] = [];
    const SNICallback = (name: string, cb: (err: null, ctx: undefined) => void) => {
      names.push(name);
      cb(null, undefined);
    };
    const server = https.createServer({ ...tls, SNICallback }, sendPng);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const err = await failure(`https://img.bgone.test:${port}/x.png`);
      expect(err).toMatchObject({ kind: 'download_failed', reason: 'connection' });
      expect(err.message).toMatch(/SELF_SIGNED|self.signed/i);
      expect(names).toEqual(['img.bgone.test']);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('toBgoneError', () => {
  it('maps the URL text to invalid_image_url (400) and the rest to failed_image_download (422), with field and reason', async () => {
    const invalid = toBgoneError(await failure('ftp://example.com/a.png'), 'image_url');
    expect(invalid).toBeInstanceOf(BgoneError);
    expect(invalid).toMatchObject({ code: 'invalid_image_url', details: { field: 'image_url', reason: 'scheme' } });
    expect(invalid.message).toBe('The image URL must start with http:// or https://.');
    expect(ERROR_STATUS[invalid.code]).toBe(400);

    const s = await serve((_req, res) => res.writeHead(403).end());
    const failed = toBgoneError(await failure(`${s.url}/x.png`), 'bg_image_url');
    expect(failed).toMatchObject({ code: 'failed_image_download', details: { field: 'bg_image_url', reason: 'status', status: 403 } });
    expect(ERROR_STATUS[failed.code]).toBe(422);
    expect(toBgoneError(new UrlFetchError('download_failed', 'empty', 'x'), 'image_url').details).toEqual({ field: 'image_url', reason: 'empty' });
  });
});
