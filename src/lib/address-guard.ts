/**
 * SSRF defence for the URLs bgone connects to on a client's behalf (webhook endpoints, images to
 * download): no control characters, no credentials, only the schemes the caller names, and never an
 * address that is not globally reachable (FORBIDDEN_RANGES: loopback, private, link-local, shared
 * (carrier-grade NAT), documentation, benchmarking, relay, reserved, multicast...) nor a
 * cloud-metadata one. A host name with a trailing dot (`localhost.`) is the same host as without.
 * A URL is checked on its text (urlProblem), then its host is resolved and every answer checked
 * (resolveCheckedAddress), and the connection goes to exactly the address checked (pinnedRequest),
 * so a name that changes its answer in between cannot slip through. `allowPrivate` lifts the
 * address rules for local setups and tests.
 *
 * An operator's allow list (FetchAllowList, parsed by parseFetchAllow) opens them host by host
 * instead: a host name it lists may resolve to private addresses, and an address inside a network
 * it lists may be connected to, whatever name led there. The cloud metadata addresses
 * (METADATA_ADDRESSES) stay refused behind a listed name and inside a listed network: only an
 * entry naming that exact address (an address, a /32 or a /128) opens one.
 */

import { lookup, Resolver } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { hasControlCharacter } from './user-text.js';

/** At most this long, so a URL always fits a database row and the logs. */
export const MAX_URL_LENGTH = 2048;

/**
 * Where clouds serve instance metadata and credentials: refused whatever else is allowed, unless an
 * allow list names the exact address. Most lie inside a forbidden range already; Azure's WireServer
 * is a public address and is refused only for being here.
 */
export const METADATA_ADDRESSES: readonly string[] = [
  '169.254.169.254', // AWS, Google Cloud, Azure, OpenStack, Oracle, DigitalOcean, Akamai and most others
  '169.254.170.2', // AWS ECS task metadata and credentials
  '169.254.170.23', // AWS EKS Pod Identity agent
  '169.254.0.23', // Tencent Cloud
  '169.254.42.42', // Scaleway
  '100.100.100.200', // Alibaba Cloud
  '192.0.0.192', // Oracle Cloud (classic)
  '168.63.129.16', // Azure WireServer (a public address)
  'fd00:ec2::254', // AWS IMDS over IPv6
  'fd00:ec2::23', // AWS EKS Pod Identity agent over IPv6
  'fd20:ce::254', // Google Cloud over IPv6
  'fd00:42::42', // Scaleway over IPv6
  'fd00:a9fe:a9fe::1', // Akamai (Linode) over IPv6
  'fd00:c1::a9fe:a9fe', // Oracle Cloud over IPv6
  'fd00:100::100:200', // Alibaba Cloud over IPv6
  'fe80::a9fe:a9fe', // OpenStack over IPv6 (link-local)
];

const METADATA = new BlockList();
for (const address of METADATA_ADDRESSES) METADATA.addAddress(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');

/**
 * The ranges refused: every entry of IANA's IPv4 and IPv6 Special-Purpose Address Registries that
 * is not globally reachable, with multicast and IPv6's deprecated site-local range besides. The
 * registry's globally reachable entries nested in a refused range (the PCP and TURN anycast
 * addresses 192.0.0.9 and 192.0.0.10, the 6a44 relay 192.88.99.2; in 2001::/23 the PCP, TURN and
 * DNS-SD anycast addresses, AMT relays, AS112, ORCHIDv2 and drone identifiers) are refused with it:
 * relays and identifiers, where no image is served. The IPv6 forms that carry an IPv4 host
 * (::ffff:0:0/96 and the others of embeddedIpv4) are judged by that host instead.
 */
export const FORBIDDEN_RANGES: Readonly<Record<'ipv4' | 'ipv6', ReadonlyArray<readonly [string, number]>>> = {
  ipv4: [
    ['0.0.0.0', 8], // "this network"
    ['10.0.0.0', 8], // private use
    ['100.64.0.0', 10], // shared address space (carrier-grade NAT)
    ['127.0.0.0', 8], // loopback
    ['169.254.0.0', 16], // link-local, cloud metadata (METADATA_ADDRESSES)
    ['172.16.0.0', 12], // private use
    ['192.0.0.0', 24], // IETF protocol assignments (DS-Lite's 192.0.0.0/29, NAT64 discovery 192.0.0.170/31 among them)
    ['192.0.2.0', 24], // documentation (TEST-NET-1)
    ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
    ['192.168.0.0', 16], // private use
    ['198.18.0.0', 15], // benchmarking
    ['198.51.100.0', 24], // documentation (TEST-NET-2)
    ['203.0.113.0', 24], // documentation (TEST-NET-3)
    ['224.0.0.0', 4], // multicast
    ['240.0.0.0', 4], // reserved, and the limited broadcast 255.255.255.255
  ],
  ipv6: [
    ['::', 128], // unspecified
    ['::1', 128], // loopback
    ['100::', 64], // discard-only
    ['100:0:0:1::', 64], // dummy prefix
    ['2001::', 23], // IETF protocol assignments (Teredo's 2001::/32 is judged by the IPv4 hosts it carries)
    ['2001:db8::', 32], // documentation
    ['3fff::', 20], // documentation
    ['5f00::', 16], // segment routing (SRv6) SIDs
    ['fc00::', 7], // unique local (most IPv6 metadata addresses among them: METADATA_ADDRESSES)
    ['fe80::', 10], // link-local
    ['fec0::', 10], // site-local: deprecated (RFC 3879), still routed inside some networks
    ['ff00::', 8], // multicast
  ],
};

const FORBIDDEN = new BlockList();
for (const family of ['ipv4', 'ipv6'] as const) for (const [net, prefix] of FORBIDDEN_RANGES[family]) FORBIDDEN.addSubnet(net, prefix, family);

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
 * the latter stored inverted). null: not such a form (`::` and `::1` are IPv6's own unspecified
 * and loopback addresses); 'refuse': local-use NAT64 (64:ff9b:1::/48), whose embedding depends on
 * a prefix length only its operator knows, so it is refused outright.
 */
function embeddedIpv4(g: number[]): string[] | 'refuse' | null {
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 7) && g[7]! <= 1) return null;
  if (zero(0, 6)) return [ipv4Of(g[6]!, g[7]!)];
  if (zero(0, 5) && g[5] === 0xffff) return [ipv4Of(g[6]!, g[7]!)];
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return [ipv4Of(g[6]!, g[7]!)];
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return [ipv4Of(g[6]!, g[7]!)];
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'refuse';
  if (g[0] === 0x2002) return [ipv4Of(g[1]!, g[2]!)];
  if (g[0] === 0x2001 && g[1] === 0) return [ipv4Of(g[2]!, g[3]!), ipv4Of(g[6]! ^ 0xffff, g[7]! ^ 0xffff)];
  return null;
}

interface Destination {
  address: string;
  family: 'ipv4' | 'ipv6';
}

/**
 * The hosts a connection to `address` reaches: the IPv4 ones an IPv6 form carries (embeddedIpv4),
 * else the address itself (an IPv6 zone index, fe80::1%eth0, names no other host). null: not an
 * address, or one refused outright.
 */
function destinations(address: string): Destination[] | null {
  const family = isIP(address);
  if (family === 4) return [{ address, family: 'ipv4' }];
  if (family === 0) return null;
  const bare = address.replace(/%.*$/, '');
  const groups = ipv6Groups(bare);
  if (!groups) return null;
  const embedded = embeddedIpv4(groups);
  if (embedded === 'refuse') return null;
  if (embedded) return embedded.map((ipv4) => ({ address: ipv4, family: 'ipv4' }));
  return [{ address: bare, family: 'ipv6' }];
}

/**
 * Whether bgone may connect to `address` for a client. Without an allow list: an address outside
 * every forbidden range and not a metadata address. With one: a forbidden address too when it lies
 * inside a network the list names, or when `nameListed` (the URL's host name is on the list); a
 * metadata address only when the list names that exact address. An IPv6 address that carries an
 * IPv4 one (mapped, compatible, translated, NAT64, 6to4, Teredo) is judged by the IPv4 address it
 * leads to, against the IPv4 entries.
 */
export function addressAllowed(address: string, allow?: FetchAllowList | undefined, nameListed = false): boolean {
  const reached = destinations(address);
  if (!reached) return false;
  return reached.every(({ address: a, family }) => {
    if (METADATA.check(a, family)) return allow?.exact.check(a, family) ?? false;
    if (!FORBIDDEN.check(a, family)) return true;
    return nameListed || (allow?.networks.check(a, family) ?? false);
  });
}

/**
 * An address bgone must never connect to for a client (no allow list). An IPv6 address that carries
 * an IPv4 one (mapped, compatible, translated, NAT64, 6to4, Teredo) is judged by the IPv4 address it
 * leads to.
 */
export function isForbiddenAddress(address: string): boolean {
  return !addressAllowed(address);
}

/** Whether `address` (an IPv4 or IPv6 address, a zone index aside) is one of METADATA_ADDRESSES, in any of its forms. */
export function isMetadataAddress(address: string): boolean {
  return (destinations(address) ?? []).some(({ address: a, family }) => METADATA.check(a, family));
}

/**
 * The operator's allow list, compiled: host names that may resolve to private addresses (exact,
 * or every name under a `*.` wildcard), networks whose addresses may be connected to, and the
 * entries that name one exact address (which alone open a metadata address).
 */
export interface FetchAllowList {
  /** The entries, normalised (lower case, canonical addresses, a full-length prefix written as the bare address). */
  readonly entries: readonly string[];
  readonly names: ReadonlySet<string>;
  /** `*.example.internal` as `.example.internal`. */
  readonly suffixes: readonly string[];
  readonly networks: BlockList;
  readonly exact: BlockList;
}

/** What an allow list's entries may be, for messages. */
export const FETCH_ALLOW_GRAMMAR =
  'comma-separated host names (images.example.internal), *.domain wildcards (*.example.internal: every name under it), IPv4 or IPv6 networks in CIDR notation (10.1.0.0/16, fd12:3456::/48) and addresses (10.1.2.3, meaning /32; fd12::7, meaning /128)';

type Entry =
  | { kind: 'name'; name: string }
  | { kind: 'suffix'; suffix: string }
  | { kind: 'network'; address: string; prefix: number; family: 'ipv4' | 'ipv6'; text: string };

/** 32-bit IPv4 or 128-bit IPv6 address as a bigint. */
function addressBits(address: string, family: 'ipv4' | 'ipv6'): bigint {
  if (family === 'ipv4') return address.split('.').reduce((n, part) => (n << 8n) | BigInt(part), 0n);
  return ipv6Groups(address)!.reduce((n, group) => (n << 16n) | BigInt(group), 0n);
}

function bitsAddress(bits: bigint, family: 'ipv4' | 'ipv6'): string {
  if (family === 'ipv4') return [24n, 16n, 8n, 0n].map((shift) => String((bits >> shift) & 0xffn)).join('.');
  const groups = Array.from({ length: 8 }, (_, i) => ((bits >> BigInt((7 - i) * 16)) & 0xffffn).toString(16)).join(':');
  return canonicalIpv6(groups);
}

/** The canonical (RFC 5952) text of an IPv6 address, as the URL parser writes it. */
function canonicalIpv6(address: string): string {
  return new URL(`http://[${address}]/`).hostname.slice(1, -1);
}

/** A host name of a URL: LDH labels (and `_`, which internal names use), ASCII, that the URL parser keeps as it is. */
function hostNameProblem(name: string): string | null {
  if (/[^\x21-\x7e]/.test(name)) return 'is not ASCII (write an internationalised name in punycode, xn--...)';
  if (name.length > 253) return 'is longer than 253 characters';
  const labels = name.split('.');
  if (labels.some((label) => !/^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/.test(label)))
    return 'is not a host name (labels of letters, digits, hyphens and underscores, 1 to 63 long, no hyphen at either end)';
  // A URL reads a host whose last label is a number as an IPv4 address (http://10.1/ is 10.0.0.1).
  if (/^(?:0x[0-9a-f]*|[0-9]+)$/.test(labels.at(-1)!)) return 'is neither an address nor a host name (a URL reads it as an IPv4 address)';
  let parsed: string;
  try {
    parsed = new URL(`http://${name}/`).hostname;
  } catch {
    parsed = '';
  }
  return parsed === name ? null : 'is not a host name a URL keeps as it is';
}

/** One entry of an allow list, normalised, or why it is not one. */
function parseEntry(raw: string): Entry | { problem: string } {
  const text = raw.trim().toLowerCase();
  const slash = text.indexOf('/');
  const addressPart = slash === -1 ? text : text.slice(0, slash);
  const family = isIP(addressPart);
  if (family !== 0 || slash !== -1 || text.startsWith('[')) {
    if (text.startsWith('[')) return { problem: 'has brackets: an IPv6 entry is written without them (fd12::7, fd12::/48)' };
    if (addressPart.includes('%')) return { problem: 'has a zone index (%eth0): an entry names no interface' };
    if (family === 0) return { problem: 'is not an IPv4 or IPv6 address before its /prefix' };
    const kind = family === 4 ? 'ipv4' : 'ipv6';
    const max = family === 4 ? 32 : 128;
    const prefixText = slash === -1 ? String(max) : text.slice(slash + 1);
    if (!/^(?:0|[1-9][0-9]{0,2})$/.test(prefixText) || Number(prefixText) > max)
      return { problem: `has a prefix length that is not a number from 0 to ${max}` };
    const prefix = Number(prefixText);
    if (kind === 'ipv6') {
      const embedded = embeddedIpv4(ipv6Groups(addressPart)!);
      if (embedded !== null)
        return { problem: 'is an IPv6 form that carries an IPv4 address, judged by that IPv4 address: list the IPv4 address or network instead' };
    }
    const bits = addressBits(addressPart, kind);
    const hostBits = (1n << BigInt(max - prefix)) - 1n;
    const network = bitsAddress(bits & ~hostBits, kind);
    if ((bits & hostBits) !== 0n) return { problem: `has bits set past its /${prefix} prefix (its network is ${network}/${prefix})` };
    return { kind: 'network', address: network, prefix, family: kind, text: prefix === max ? network : `${network}/${prefix}` };
  }
  const wildcard = text.startsWith('*.');
  const name = (wildcard ? text.slice(2) : text).replace(/\.$/, '');
  if (name === '') return { problem: 'is empty' };
  if (name.includes('*')) return { problem: 'has a * elsewhere than a leading *. (*.example.internal)' };
  const problem = hostNameProblem(name);
  if (problem) return { problem };
  return wildcard ? { kind: 'suffix', suffix: `.${name}` } : { kind: 'name', name };
}

/**
 * An allow list from its entries (an array, or one comma-separated string), or why it is not one:
 * the first bad entry, named with its position. Empty: no list (undefined).
 */
export function parseFetchAllow(value: unknown): { list: FetchAllowList | undefined } | { problem: string } {
  let raw: unknown[];
  if (typeof value === 'string') raw = value.trim() === '' ? [] : value.split(',');
  else if (Array.isArray(value)) raw = value;
  else return { problem: 'it is not a list of entries' };
  const entries: Entry[] = [];
  for (const [i, item] of raw.entries()) {
    const where = raw.length === 1 ? 'the entry' : `entry ${i + 1} of ${raw.length}`;
    if (typeof item !== 'string') return { problem: `${where} is not a string` };
    if (item.trim() === '') return { problem: `${where} is empty` };
    const entry = parseEntry(item);
    if ('problem' in entry) return { problem: `${where}, "${item.trim()}", ${entry.problem}` };
    entries.push(entry);
  }
  if (entries.length === 0) return { list: undefined };
  const networks = new BlockList();
  const exact = new BlockList();
  const names = new Set<string>();
  const suffixes: string[] = [];
  const texts: string[] = [];
  for (const entry of entries) {
    if (entry.kind === 'name') {
      names.add(entry.name);
      texts.push(entry.name);
    } else if (entry.kind === 'suffix') {
      suffixes.push(entry.suffix);
      texts.push(`*${entry.suffix}`);
    } else {
      networks.addSubnet(entry.address, entry.prefix, entry.family);
      if (entry.prefix === (entry.family === 'ipv4' ? 32 : 128)) exact.addAddress(entry.address, entry.family);
      texts.push(entry.text);
    }
  }
  return { list: { entries: texts, names, suffixes, networks, exact } };
}

/** Whether the host name `host` (as urlHost gives it) is on the list: an exact name, or under a wildcard. */
export function hostListed(allow: FetchAllowList | undefined, host: string): boolean {
  if (!allow || isIP(host) !== 0) return false;
  const name = host.toLowerCase();
  return allow.names.has(name) || allow.suffixes.some((suffix) => name.endsWith(suffix));
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
 * `localhost` (unless listed by name) or an address the rules refuse (addressAllowed).
 */
export type UrlProblemReason = 'too_long' | 'malformed' | 'scheme' | 'credentials' | 'blocked_address';

export interface UrlProblem {
  reason: UrlProblemReason;
  /** An English sentence for the client. */
  message: string;
}

export interface UrlRules {
  /** Lifts the address rules (localhost, forbidden IP literals), metadata addresses included. */
  allowPrivate: boolean;
  /** The operator's allow list (image downloads only): hosts and networks opened one by one. */
  allow?: FetchAllowList | undefined;
  /** The protocols accepted, as URL.protocol spells them: ['https:'] or ['http:', 'https:']. */
  schemes: readonly string[];
}

/**
 * Checks a URL's text; returns why it is refused, or null. A host that is an address is checked
 * here; a name is checked where it resolves (resolveCheckedAddress).
 */
export function urlProblem(raw: string, { allowPrivate, schemes, allow }: UrlRules): UrlProblem | null {
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
  if (LOCALHOST.test(host) && !hostListed(allow, host)) return { reason: 'blocked_address', message: 'The URL must not point to this machine.' };
  if (isIP(host) !== 0 && !addressAllowed(host, allow))
    return { reason: 'blocked_address', message: 'The URL must not point to a loopback, private, link-local or metadata address.' };
  return null;
}

export interface ResolveOptions {
  /** Aborts the resolution (the caller's deadline): it then rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** DNS servers to ask instead of the system's (`host` or `host:port`; tests run their own). */
  dnsServers?: readonly string[] | undefined;
  /** The operator's allow list (image downloads only; see addressAllowed). */
  allow?: FetchAllowList | undefined;
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
 * the queries. With `systemToo` (private addresses allowed, or a name the operator listed), a name
 * DNS does not know is looked up by the system as well, so that /etc/hosts names (`localhost`
 * among them) keep working there.
 */
async function addressesOf(host: string, systemToo: boolean, options: ResolveOptions): Promise<Array<{ address: string; family: 4 | 6 }>> {
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
    if (!systemToo) return [];
    const system = await Promise.race([lookup(host, { all: true, verbatim: true }).catch(() => []), aborted(signal)]);
    // IPv4 first, as DNS's answers are (the system lists /etc/hosts lines in their order).
    return system.map((a) => ({ address: a.address, family: a.family === 6 ? (6 as const) : (4 as const) })).sort((a, b) => a.family - b.family);
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
}

/**
 * Resolves a host (a URL's host as urlHost gives it: a name, or an address without brackets) to the
 * one address to connect to, IPv4 first. An address is checked as it is; a name is resolved and
 * refused if any of its answers is refused (addressAllowed, with the name's own place on the allow
 * list), so that which answer a connection would pick does not matter. Throws an AddressError (or
 * the signal's reason, once it aborts).
 */
export async function resolveCheckedAddress(host: string, allowPrivate: boolean, options: ResolveOptions = {}): Promise<CheckedAddress> {
  const { allow } = options;
  const literal = isIP(host);
  if (literal !== 0) {
    if (!allowPrivate && !addressAllowed(host, allow))
      throw new AddressError('blocked_address', `${host} is a loopback, private, link-local or metadata address`);
    return { address: host, family: literal as 4 | 6 };
  }
  const listed = hostListed(allow, host);
  if (!allowPrivate && !listed && LOCALHOST.test(host)) throw new AddressError('blocked_address', `${host} is this machine`);
  const answers = await addressesOf(host, allowPrivate || listed, options);
  if (answers.length === 0) throw new AddressError('dns', `${host} does not resolve`);
  if (!allowPrivate && answers.some((a) => !addressAllowed(a.address, allow, listed)))
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
