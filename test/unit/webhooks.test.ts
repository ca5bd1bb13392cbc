/** The webhook building blocks alone: signatures, the address guard, the retry schedule. */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isForbiddenAddress } from '../../src/lib/address-guard.js';
import { MAX_ATTEMPTS, nextAttemptAt, RETRY_DELAYS_MS } from '../../src/webhooks/retry-schedule.js';
import { signWebhook } from '../../src/webhooks/signature.js';
import { resolveWebhookAddress, webhookUrlProblem } from '../../src/webhooks/webhook-url.js';
import { startDnsServer } from '../helpers/dns-server.js';
import { EMBEDDED_PRIVATE_IPV6 } from '../helpers/webhook-addresses.js';

describe('signWebhook', () => {
  it('is verified by the standardwebhooks package, and only for the exact body, id and timestamp', () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const body = JSON.stringify({ type: 'webhook.test', timestamp: new Date().toISOString(), data: { ünïcode: '✓' } });
    const id = 'msg_abc';
    const ts = Math.floor(Date.now() / 1000);
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': signWebhook(secret, id, ts, body) };
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow();
    expect(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'msg_other' })).toThrow();
    expect(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(body, headers)).toThrow();
    expect(() => signWebhook('not-a-secret', id, ts, body)).toThrow(TypeError);
  });
});

describe('address guard', () => {
  it('refuses loopback, private, link-local, metadata, CGNAT, multicast and mapped forms of them', () => {
    for (const a of [
      '127.0.0.1',
      '127.255.0.9',
      '10.0.0.1',
      '172.16.5.4',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fd00:ec2::254',
      'fc00::5',
      'fec0::1', // site-local, deprecated (RFC 3879) but still routed inside some networks
      'feff:ffff::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      'not-an-ip',
    ])
      expect(isForbiddenAddress(a), a).toBe(true);
    for (const a of ['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8']) expect(isForbiddenAddress(a), a).toBe(false);
  });

  it('checks the URL text: https only, no credentials, no local names or addresses, unless private is allowed', () => {
    expect(webhookUrlProblem('https://hooks.example.com/x', false)).toBeNull();
    expect(webhookUrlProblem('http://hooks.example.com/x', false)).toMatch(/https/);
    expect(webhookUrlProblem('https://user:pw@hooks.example.com/x', false)).toMatch(/credentials/);
    expect(webhookUrlProblem('https://localhost:8443/x', false)).toMatch(/this machine/);
    expect(webhookUrlProblem('https://[::1]/x', false)).toMatch(/loopback/);
    expect(webhookUrlProblem('not a url', false)).toMatch(/valid/);
    expect(webhookUrlProblem(`https://e.com/${'a'.repeat(2100)}`, false)).toMatch(/longer/);
    expect(webhookUrlProblem('http://127.0.0.1:9/x', true)).toBeNull();
    // A trailing dot names the same host.
    expect(webhookUrlProblem('https://localhost./x', false)).toMatch(/this machine/);
    expect(webhookUrlProblem('https://hooks.localhost./x', false)).toMatch(/this machine/);
    expect(webhookUrlProblem('https://hooks.example.com./x', false)).toBeNull();
    expect(webhookUrlProblem('https://./x', true)).toMatch(/no host/);
    expect(webhookUrlProblem('https://[fec0::1]/x', false)).toMatch(/loopback, private/);
    // The URL parser drops CR, LF and TAB silently; the text as given would be stored with them.
    for (const control of ['\r\n', '\n', '\t', '\u0000', '\u007f', '\u0085'])
      expect(webhookUrlProblem(`https://hooks.example.com/a${control}b`, false), JSON.stringify(control)).toMatch(/control characters/);
  });

  it('resolves a name and refuses it when it resolves to a forbidden address (checked at delivery time)', async () => {
    await expect(resolveWebhookAddress('https://127.0.0.1/x', false)).rejects.toThrow(/loopback/);
    await expect(resolveWebhookAddress('https://localhost/x', false)).rejects.toThrow(/this machine/);
    await expect(resolveWebhookAddress('http://127.0.0.1:9/x', true)).resolves.toEqual({ address: '127.0.0.1', family: 4 });
    await expect(resolveWebhookAddress('https://localhost./x', false)).rejects.toThrow(/this machine/);
  });
});

describe('address guard: IPv6 forms that embed an IPv4 address', () => {
  it('refuses each form that leads to a private IPv4 host, and lets the same forms of a public one through', () => {
    for (const a of EMBEDDED_PRIVATE_IPV6) expect(isForbiddenAddress(a), a).toBe(true);
    for (const a of ['::ffff:8.8.8.8', '::ffff:808:808', '64:ff9b::808:808', '2002:808:808::1', '2001:0:808:808::7f7f:fffe', '2606:4700::1111'])
      expect(isForbiddenAddress(a), a).toBe(false);
    for (const a of ['1:2:3:4:5:6:7:8:9', '::1::2', 'fe80::1%eth0']) expect(isForbiddenAddress(a), a).toBe(true);
  });

  it('refuses them as URL hosts, in whatever notation the URL spells them', () => {
    for (const a of EMBEDDED_PRIVATE_IPV6) {
      expect(webhookUrlProblem(`https://[${a}]/hook`, false), a).toMatch(/loopback, private/);
      expect(webhookUrlProblem(`https://[${a}]/hook`, true), a).toBeNull(); // the local-setup opt-in lifts it
    }
    expect(webhookUrlProblem('https://[64:ff9b::808:808]/hook', false)).toBeNull();
  });
});

describe('address guard: resolution at delivery time (a real DNS server on 127.0.0.1)', () => {
  let dns: Awaited<ReturnType<typeof startDnsServer>>;
  beforeAll(async () => {
    dns = await startDnsServer({
      'public.bgone.test': { a: ['93.184.216.34'], aaaa: ['2606:4700::1111'] },
      'v6only.bgone.test': { aaaa: ['2606:4700::1111'] },
      'mixed.bgone.test': { a: ['93.184.216.34'], aaaa: ['64:ff9b::a9fe:a9fe'] },
      'noaddress.bgone.test': {},
      'sitelocal.bgone.test': { aaaa: ['fec0::1'] },
      'hang.bgone.test': { hang: true },
      ...Object.fromEntries(EMBEDDED_PRIVATE_IPV6.map((a, i) => [`embedded${i}.bgone.test`, { aaaa: [a] }])),
    });
  });
  afterAll(() => dns.close());
  const on = () => ({ dnsServers: [dns.address] });

  it('connects to the first IPv4 answer, else the first IPv6 one', async () => {
    await expect(resolveWebhookAddress('https://public.bgone.test/x', false, on())).resolves.toEqual({ address: '93.184.216.34', family: 4 });
    await expect(resolveWebhookAddress('https://v6only.bgone.test/x', false, on())).resolves.toEqual({ address: '2606:4700::1111', family: 6 });
  });

  it('refuses a name with any IPv6 answer that embeds a private IPv4 address', async () => {
    for (const [i, a] of EMBEDDED_PRIVATE_IPV6.entries())
      await expect(resolveWebhookAddress(`https://embedded${i}.bgone.test/x`, false, on()), a).rejects.toThrow(/resolves to a loopback, private/);
    await expect(resolveWebhookAddress('https://mixed.bgone.test/x', false, on())).rejects.toThrow(/resolves to a loopback, private/);
  });

  it('refuses a name that resolves to a site-local IPv6 address (fec0::/10), with or without a trailing dot', async () => {
    await expect(resolveWebhookAddress('https://sitelocal.bgone.test/x', false, on())).rejects.toThrow(/resolves to a loopback, private/);
    await expect(resolveWebhookAddress('https://sitelocal.bgone.test./x', false, on())).rejects.toThrow(/resolves to a loopback, private/);
    await expect(resolveWebhookAddress('https://public.bgone.test./x', false, on())).resolves.toEqual({ address: '93.184.216.34', family: 4 });
  });

  it('a name without addresses does not resolve; a DNS server that fails is named in the error', async () => {
    await expect(resolveWebhookAddress('https://unknown.bgone.test/x', false, on())).rejects.toThrow(/does not resolve/);
    await expect(resolveWebhookAddress('https://noaddress.bgone.test/x', false, on())).rejects.toThrow(/does not resolve/);
    // Nothing listens on port 9 (discard) of 127.0.0.1: the query is refused.
    await expect(resolveWebhookAddress('https://public.bgone.test/x', false, { dnsServers: ['127.0.0.1:9'] })).rejects.toThrow(/DNS E/);
  });

  it("a name whose server never answers gives up when the signal aborts (the attempt's deadline)", async () => {
    const deadline = AbortSignal.timeout(200);
    const started = performance.now();
    await expect(resolveWebhookAddress('https://hang.bgone.test/x', false, { ...on(), signal: deadline })).rejects.toThrow(/timeout|aborted/i);
    expect(performance.now() - started).toBeLessThan(5000); // well before c-ares's own retries end
    expect(dns.queries.filter((q) => q.startsWith('hang.bgone.test'))).not.toHaveLength(0);
    const gone = new AbortController();
    gone.abort(new Error('already over'));
    await expect(resolveWebhookAddress('https://public.bgone.test/x', false, { ...on(), signal: gone.signal })).rejects.toThrow(/already over/);
  });
});

describe('retry schedule', () => {
  it('5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then nothing', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    expect(RETRY_DELAYS_MS).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    expect(MAX_ATTEMPTS).toBe(8);
    expect(nextAttemptAt(1, now)?.toISOString()).toBe('2026-01-01T00:00:05.000Z');
    expect(nextAttemptAt(2, now)?.toISOString()).toBe('2026-01-01T00:05:00.000Z');
    expect(nextAttemptAt(7, now)?.toISOString()).toBe('2026-01-01T10:00:00.000Z');
    expect(nextAttemptAt(8, now)).toBeNull();
  });
});
