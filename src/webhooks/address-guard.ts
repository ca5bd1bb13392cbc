/**
 * SSRF defence for webhook URLs (docs/contract.md): `https://` only, and never an address on
 * loopback, private, link-local, carrier-grade NAT, multicast or cloud-metadata ranges. A URL is
 * checked on its text when an endpoint is created, and again on the address its name resolves to
 * at each delivery (deliverer.ts connects to exactly the address checked here, so a name that
 * changes its answer in between cannot slip through). `allowPrivate` (BGONE_WEBHOOK_ALLOW_PRIVATE)
 * lifts both rules for local setups and tests.
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/** At most this long, so a URL always fits the outbox and the logs. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

const FORBIDDEN = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  FORBIDDEN.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128],
  ['fc00::', 7], // unique local (AWS's IPv6 metadata address fd00:ec2::254 among them)
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
  ['64:ff9b::', 96], // NAT64 of any IPv4 address, private ones included
] as const)
  FORBIDDEN.addSubnet(net, prefix, 'ipv6');

/** An address a webhook must never reach (IPv4-mapped IPv6 addresses are judged as their IPv4). */
export function isForbiddenAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return FORBIDDEN.check(mapped[1]!, 'ipv4');
  const family = isIP(address);
  if (family === 0) return true; // not an address at all: refuse rather than guess
  return FORBIDDEN.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** The host part of a URL as an address or a name (IPv6 brackets removed). */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * Checks a webhook URL's text; returns why it is refused, or null. A host that is an address is
 * checked here; a name is checked where it resolves (resolveWebhookAddress).
 */
export function webhookUrlProblem(raw: string, allowPrivate: boolean): string | null {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) return `The URL is longer than ${MAX_WEBHOOK_URL_LENGTH} characters.`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'The URL is not a valid absolute URL.';
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return 'The URL must start with https://.';
  if (url.username || url.password) return 'The URL must not contain credentials.';
  if (url.hash) return 'The URL must not contain a fragment.';
  if (allowPrivate) return null;
  const host = hostOf(url);
  if (/^localhost$|\.localhost$/i.test(host)) return 'The URL must not point to this machine.';
  if (isIP(host) !== 0 && isForbiddenAddress(host)) return 'The URL must not point to a loopback, private, link-local or metadata address.';
  return null;
}

/**
 * Resolves the URL's host to the one address a delivery connects to, refusing (with an Error whose
 * message says why) a forbidden URL or a name with any forbidden address among its answers.
 */
export async function resolveWebhookAddress(raw: string, allowPrivate: boolean): Promise<{ address: string; family: 4 | 6 }> {
  const problem = webhookUrlProblem(raw, allowPrivate);
  if (problem) throw new Error(problem);
  const host = hostOf(new URL(raw));
  const literal = isIP(host);
  if (literal !== 0) return { address: host, family: literal as 4 | 6 };
  const answers = await lookup(host, { all: true, verbatim: true });
  if (answers.length === 0) throw new Error(`${host} does not resolve`);
  if (!allowPrivate && answers.some((a) => isForbiddenAddress(a.address)))
    throw new Error(`${host} resolves to a loopback, private, link-local or metadata address`);
  const first = answers[0]!;
  return { address: first.address, family: first.family as 4 | 6 };
}
