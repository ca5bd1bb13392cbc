/**
 * SSRF defence for the URLs bgone connects to on a client's behalf (webhook endpoints, images to
 * download): no control characters, no credentials, only the schemes the caller names, and never an
 * address on loopback, private, site-local, link-local, carrier-grade NAT, multicast or
 * cloud-metadata ranges. A host name with a trailing dot (`localhost.`) is the same host as without.
 * A URL is checked on its text (urlProblem), then its host is resolved and every answer checked
 * (resolveCheckedAddress), and the connection goes to exactly the address checked (pinnedRequest),
 * so a name that changes its answer in between cannot slip through. `allowPrivate` lifts the
 * address rules for local setups and tests.
 */

import { lookup, Resolver } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { hasControlCharacter } from './user-text.js';

/** At most this long, so a URL always fits a database row and the logs. */
export const MAX_URL_LENGTH = 2048;

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
 * An address bgone must never connect to for a client. An IPv6 address that carries an IPv4 one (mapped,
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
export function urlHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
}

/** `localhost` and its subdomains: this machine whatever DNS says (RFC 6761). */
const LOCALHOST = /^localhost$|\.localhost$/i;

/**
 * Why a URL's text is refused. 'blocked_address': the text is well formed, but its host is
 * `localhost` or an address in a forbidden range.
 */
export type UrlProblemReason = 'too_long' | 'malformed' | 'scheme' | 'credentials' | 'blocked_address';

export interface UrlProblem {
  reason: UrlProblemReason;
  /** An English sentence for the client. */
  message: string;
}

export interface UrlRules {
  /** Lifts the address rules (localhost, forbidden IP literals). */
  allowPrivate: boolean;
  /** The protocols accepted, as URL.protocol spells them: ['https:'] or ['http:', 'https:']. */
  schemes: readonly string[];
}

/**
 * Checks a URL's text; returns why it is refused, or null. A host that is an address is checked
 * here; a name is checked where it resolves (resolveCheckedAddress).
 */
export function urlProblem(raw: string, { allowPrivate, schemes }: UrlRules): UrlProblem | null {
  if (raw.length > MAX_URL_LENGTH) return { reason: 'too_long', message: `The URL is longer than ${MAX_URL_LENGTH} characters.` };
  // The URL parser drops CR, LF and TAB without a word, but the text as given is what is stored.
  if (hasControlCharacter(raw)) return { reason: 'malformed', message: 'The URL must not contain control characters (such as CR, LF or NUL).' };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { reason: 'malformed', message: 'The URL is not a valid absolute URL.' };
  }
  if (!schemes.includes(url.protocol)) {
    const starts = schemes.map((s) => `${s}//`).join(' or ');
    return { reason: 'scheme', message: `The URL must start with ${starts}.` };
  }
  if (url.username || url.password) return { reason: 'credentials', message: 'The URL must not contain credentials.' };
  const host = urlHost(url);
  if (host === '') return { reason: 'malformed', message: 'The URL has no host name.' };
  if (allowPrivate) return null;
  if (LOCALHOST.test(host)) return { reason: 'blocked_address', message: 'The URL must not point to this machine.' };
  if (isIP(host) !== 0 && isForbiddenAddress(host))
    return { reason: 'blocked_address', message: 'The URL must not point to a loopback, private, link-local or metadata address.' };
  return null;
}

export interface ResolveOptions {
  /** Aborts the resolution (the caller's deadline): it then rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** DNS servers to ask instead of the system's (`host` or `host:port`; tests run their own). */
  dnsServers?: readonly string[] | undefined;
}

export interface CheckedAddress {
  address: string;
  family: 4 | 6;
}

/** Why a host has no address to connect to: it resolves to a forbidden one, or DNS gave none. */
export class AddressError extends Error {
  readonly reason: 'blocked_address' | 'dns';
  constructor(reason: 'blocked_address' | 'dns', message: string) {
    super(message);
    this.name = 'AddressError';
    this.reason = reason;
  }
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
    if (failure) throw new AddressError('dns', `${host}: DNS ${(failure.reason as NodeJS.ErrnoException).code ?? (failure.reason as Error).message}`);
    if (!allowPrivate) return [];
    const system = await Promise.race([lookup(host, { all: true, verbatim: true }).catch(() => []), aborted(signal)]);
    return system.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
}

/**
 * Resolves a host (a URL's host as urlHost gives it: a name, or an address without brackets) to the
 * one address to connect to, IPv4 first. An address is checked as it is; a name is resolved and
 * refused if any of its answers is forbidden, so that which answer a connection would pick does not
 * matter. Throws an AddressError (or the signal's reason, once it aborts).
 */
export async function resolveCheckedAddress(host: string, allowPrivate: boolean, options: ResolveOptions = {}): Promise<CheckedAddress> {
  const literal = isIP(host);
  if (literal !== 0) {
    if (!allowPrivate && isForbiddenAddress(host)) throw new AddressError('blocked_address', `${host} is a loopback, private, link-local or metadata address`);
    return { address: host, family: literal as 4 | 6 };
  }
  if (!allowPrivate && LOCALHOST.test(host)) throw new AddressError('blocked_address', `${host} is this machine`);
  const answers = await addressesOf(host, allowPrivate, options);
  if (answers.length === 0) throw new AddressError('dns', `${host} does not resolve`);
  if (!allowPrivate && answers.some((a) => isForbiddenAddress(a.address)))
    throw new AddressError('blocked_address', `${host} resolves to a loopback, private, link-local or metadata address`);
  return answers[0]!;
}

/**
 * An HTTP or HTTPS request (by the URL's protocol) that connects to `target`, the address checked
 * for the URL's host, whatever the name resolves to by now. The URL's host name stays the request's
 * host: it is the Host header and, over TLS, the SNI name the certificate is checked against. No
 * agent: one connection per request, never reused or shared.
 */
export function pinnedRequest(url: URL, target: CheckedAddress, options: http.RequestOptions): http.ClientRequest {
  const pinned: LookupFunction = (_host, lookupOptions, callback) => {
    if ((lookupOptions as { all?: boolean }).all) (callback as unknown as (e: null, a: CheckedAddress[]) => void)(null, [target]);
    else callback(null, target.address, target.family);
  };
  const request = url.protocol === 'https:' ? https.request : http.request;
  return request(url, { ...options, lookup: pinned, agent: false });
}
