/** The webhook building blocks alone: signatures, the address guard, the retry schedule. */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { isForbiddenAddress, resolveWebhookAddress, webhookUrlProblem } from '../../src/webhooks/address-guard.js';
import { MAX_ATTEMPTS, nextAttemptAt, RETRY_DELAYS_MS } from '../../src/webhooks/retry-schedule.js';
import { signWebhook } from '../../src/webhooks/signature.js';

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
  });

  it('resolves a name and refuses it when it resolves to a forbidden address (checked at delivery time)', async () => {
    await expect(resolveWebhookAddress('https://127.0.0.1/x', false)).rejects.toThrow(/loopback/);
    await expect(resolveWebhookAddress('https://localhost/x', false)).rejects.toThrow(/this machine/);
    await expect(resolveWebhookAddress('http://127.0.0.1:9/x', true)).resolves.toEqual({ address: '127.0.0.1', family: 4 });
    // `localhost.` (trailing dot) is not caught by the name rule: its resolved address is.
    await expect(resolveWebhookAddress('https://localhost./x', false)).rejects.toThrow(/resolves to|does not resolve|ENOTFOUND|EAI_AGAIN/);
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
