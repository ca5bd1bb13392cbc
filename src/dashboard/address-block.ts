/**
 * The block of addresses one client controls, for limits counted "per address". An IPv4 address
 * is one block. An IPv6 host is normally handed a whole /64 (SLAAC, privacy addresses, a /64 per
 * customer), so counting single IPv6 addresses would give one client 2^64 fresh counts: the block
 * of an IPv6 address is its /64. An IPv4-mapped IPv6 address (::ffff:a.b.c.d, what a dual-stack
 * socket reports for an IPv4 client) is that IPv4 address.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** The 8 16-bit groups of a valid IPv6 address (without a zone), `::` and a dotted IPv4 tail expanded. */
function ipv6Groups(address: string): number[] {
  const parse = (part: string): number[] => {
    if (part === '') return [];
    const groups: number[] = [];
    for (const piece of part.split(':')) {
      if (piece.includes('.')) {
        const [a, b, c, d] = piece.split('.').map(Number) as [number, number, number, number];
        groups.push((a << 8) | b, (c << 8) | d);
      } else {
        groups.push(Number.parseInt(piece, 16));
      }
    }
    return groups;
  };
  const gap = address.indexOf('::');
  if (gap === -1) return parse(address);
  const head = parse(address.slice(0, gap));
  const tail = parse(address.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/**
 * `a.b.c.d` for an IPv4 address (or an IPv4-mapped IPv6 one), `xxxx:xxxx:xxxx:xxxx::/64` for any
 * other IPv6 address (one canonical spelling per /64, whatever the input's spelling), and the input
 * unchanged when it is neither (never thrown on: a limit still counts it, as one block).
 */
export function addressBlock(address: string): string {
  if (isIPv4(address)) return address;
  const bare = address.replace(/^\[(.*)\]$/, '$1').split('%')[0]!; // brackets and a zone (fe80::1%eth0) are no part of the address
  if (!isIPv6(bare)) return address;
  const groups = ipv6Groups(bare.toLowerCase());
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}
