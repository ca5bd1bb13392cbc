/**
 * The peer's address in one spelling on both backends. uWebSockets.js writes IPv6 uncompressed
 * ("0000:0000:0000:0000:0000:ffff:7f00:0001") and node:http compressed ("::ffff:127.0.0.1"); rate
 * limits, sign-up limits and logs key on this text, so it must not depend on the backend.
 */

const IPV4_MAPPED = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;

/**
 * IPv4 as dotted quad (IPv4-mapped IPv6 included: a dual-stack socket's IPv4 client is the same
 * client), IPv6 in its compressed RFC 5952 form without brackets; text that is neither comes back
 * unchanged (e.g. an address with a zone id, or '' for a socket that is already gone).
 */
export function canonicalAddress(text: string): string {
  if (!text.includes(':')) return text;
  let host: string;
  try {
    // The URL parser is the platform's IPv6 parser and serialiser: it compresses and lower-cases.
    host = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return text;
  }
  const mapped = IPV4_MAPPED.exec(host);
  if (!mapped) return host;
  const high = Number.parseInt(mapped[1]!, 16);
  const low = Number.parseInt(mapped[2]!, 16);
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}
