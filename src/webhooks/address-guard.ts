/**
 * SSRF defence for webhook URLs (docs/contract.md): `https://` only, no control characters, and
 * never an address on loopback, private, site-local, link-local, carrier-grade NAT, multicast or
 * cloud-metadata ranges. A host name with a trailing dot (`localhost.`) is the same host as without. A URL is
 * checked on its text when an endpoint is created, and again on the address its name resolves to
 * at each delivery (deliverer.ts connects to exactly the address checked here, so a name that
 * changes its answer in between cannot slip through). `allowPrivate` (BGONE_WEBHOOK_ALLOW_PRIVATE)
 * lifts both rules for local setups and tests.
 */
import { lookup, Resolver } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { hasControlCharacter } from '../service/user-text.js';

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
  ['fec0::', 10], // site-local: deprecated (RFC 3879), still routed inside some networks
  ['ff00::', 8], // multicast
] as const)
  FORBIDDEN.addSubnet(net, prefix, 'ipv6');

/** The 16-bit groups of an IPv6 address (a trailing dotted IPv4 part becomes the last two), or null. */
function ipv6Groups(address: string): number[] | null {
  let text = address;
  const dotted = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(2).map(Number) as [number, number, number, number];
    text = `${dotted[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const part = (h: string | undefined) => (h ? h.split(':').map((g) => Number.parseInt(g, 16)) : []);
  const head = part(halves[0]);
  const tail = part(halves[1]);
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...head, ...new Array<number>(halves.length === 2 ? missing : 0).fill(0), ...tail];
  return groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

const ipv4Of = (high: number, low: number) => `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;

/**
 * The IPv4 addresses an IPv6 address carries to, for the forms that reach an IPv4 host through it:
 * IPv4-compatible `::a.b.c.d`, IPv4-mapped `::ffff:a.b.c.d`, SIIT's `::ffff:0:a.b.c.d`, NAT64's
 * well-known `64:ff9b::/96`, 6to4 `2002::/16` and Teredo `2001::/32` (its server and its client,
 * the latter stored inverted). null: not such a form; 'refuse': local-use NAT64 (64:ff9b:1::/48),
 * whose embedding depends on a prefix length only its operator knows, so it is refused outright.
 */
function embeddedIpv4(g: number[]): string[] | 'refuse' | null {
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 6)) return [ipv4Of(g[6]!, g[7]!)];
  if (zero(0, 5) && g[5] === 0xffff) return [ipv4Of(g[6]!, g[7]!)];
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return [ipv4Of(g[6]!, g[7]!)];
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return [ipv4Of(g[6]!, g[7]!)];
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'refuse';
  if (g[0] === 0x2002) return [ipv4Of(g[1]!, g[2]!)];
  if (g[0] === 0x2001 && g[1] === 0) return [ipv4Of(g[2]!, g[3]!), ipv4Of(g[6]! ^ 0xffff, g[7]! ^ 0xffff)];
  return null;
}

/**
 * An address a webhook must never reach. An IPv6 address that carries an IPv4 one (mapped,
 * compatible, translated, NAT64, 6to4, Teredo) is judged by the IPv4 address it leads to.
 */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true; // not an address at all: refuse rather than guess
  if (family === 4) return FORBIDDEN.check(address, 'ipv4');
  const groups = ipv6Groups(address.replace(/%.*$/, '')); // a zone index (fe80::1%eth0) names no other host
  if (!groups) return true;
  const embedded = embeddedIpv4(groups);
  if (embedded === 'refuse') return true;
  if (embedded) return embedded.some((ipv4) => FORBIDDEN.check(ipv4, 'ipv4'));
  return FORBIDDEN.check(address, 'ipv6');
}

/**
 * The host part of a URL as an address or a name (IPv6 brackets removed), without the trailing dots
 * of a fully qualified name: `localhost.` is checked, resolved and refused as `localhost`.
 */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
}

/**
 * Checks a webhook URL's text; returns why it is refused, or null. A host that is an address is
 * checked here; a name is checked where it resolves (resolveWebhookAddress).
 */
export function webhookUrlProblem(raw: string, allowPrivate: boolean): string | null {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) return `The URL is longer than ${MAX_WEBHOOK_URL_LENGTH} characters.`;
  // The URL parser drops CR, LF and TAB without a word, but the text as given is what is stored.
  if (hasControlCharacter(raw)) return 'The URL must not contain control characters (such as CR, LF or NUL).';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'The URL is not a valid absolute URL.';
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return 'The URL must start with https://.';
  if (url.username || url.password) return 'The URL must not contain credentials.';
  if (url.hash) return 'The URL must not contain a fragment.';
  const host = hostOf(url);
  if (host === '') return 'The URL has no host name.';
  if (allowPrivate) return null;
  if (/^localhost$|\.localhost$/i.test(host)) return 'The URL must not point to this machine.';
  if (isIP(host) !== 0 && isForbiddenAddress(host)) return 'The URL must not point to a loopback, private, link-local or metadata address.';
  return null;
}

export interface ResolveOptions {
  /** Aborts the resolution (the attempt's deadline): it then rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** DNS servers to ask instead of the system's (`host` or `host:port`; tests run their own). */
  dnsServers?: readonly string[] | undefined;
}

/** DNS answers that mean "no such name or no address of that family", not a failure to ask. */
const NO_ANSWER = new Set(['ENOTFOUND', 'ENODATA']);

/** Rejects with the signal's reason once it aborts (never, without a signal). */
function aborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (!signal) return;
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/**
 * A name's addresses, IPv4 first. Asked with c-ares (dns.Resolver), which runs on the event loop:
 * dns.lookup() takes a thread of libuv's small pool for each name (at most 2 at once), so a few
 * names whose servers never answer would hold every other lookup behind them. An abort cancels
 * the queries. With `allowPrivate` (local setups), a name DNS does not know is looked up by the
 * system as well, so that /etc/hosts names keep working there.
 */
async function addressesOf(host: string, allowPrivate: boolean, options: ResolveOptions): Promise<Array<{ address: string; family: 4 | 6 }>> {
  const { signal } = options;
  const resolver = new Resolver();
  if (options.dnsServers?.length) resolver.setServers([...options.dnsServers]);
  const cancel = () => resolver.cancel();
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    const [v4, v6] = await Promise.race([Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]), aborted(signal)]);
    const found = [
      ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
      ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
    ];
    if (found.length > 0) return found;
    const failure = [v4, v6].find((r): r is PromiseRejectedResult => r.status === 'rejected' && !NO_ANSWER.has((r.reason as NodeJS.ErrnoException).code ?? ''));
    if (failure) throw new Error(`${host}: DNS ${(failure.reason as NodeJS.ErrnoException).code ?? (failure.reason as Error).message}`);
    if (!allowPrivate) return [];
    const system = await Promise.race([lookup(host, { all: true, verbatim: true }).catch(() => []), aborted(signal)]);
    return system.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
}

/**
 * Resolves the URL's host to the one address a delivery connects to, refusing (with an Error whose
 * message says why) a forbidden URL or a name with any forbidden address among its answers.
 */
export async function resolveWebhookAddress(raw: string, allowPrivate: boolean, options: ResolveOptions = {}): Promise<{ address: string; family: 4 | 6 }> {
  const problem = webhookUrlProblem(raw, allowPrivate);
  if (problem) throw new Error(problem);
  const host = hostOf(new URL(raw));
  const literal = isIP(host);
  if (literal !== 0) return { address: host, family: literal as 4 | 6 };
  const answers = await addressesOf(host, allowPrivate, options);
  if (answers.length === 0) throw new Error(`${host} does not resolve`);
  if (!allowPrivate && answers.some((a) => isForbiddenAddress(a.address)))
    throw new Error(`${host} resolves to a loopback, private, link-local or metadata address`);
  return answers[0]!;
}
