/** Addresses the webhook tests use against the address guard. */

/** IPv6 literals that lead to a loopback, private or metadata IPv4 host */
export const EMBEDDED_PRIVATE_IPV6 = [
  '::127.0.0.1', // IPv4-compatible
  '::7f00:1',
  '::ffff:0:7f00:1', // SIIT's translated form of 127.0.0.1
  '::ffff:0:10.0.0.1',
  '::ffff:7f00:1', // IPv4-mapped, in hex
  '::ffff:a9fe:a9fe', // mapped 169.254.169.254
  '2002:7f00:1::', // 6to4 of 127.0.0.1
  '2002:a00:1::1', // 6to4 of 10.0.0.1
  '2002:c0a8:101::5', // 6to4 of 192.168.1.1
  '64:ff9b::7f00:1', // NAT64 of 127.0.0.1
  '64:ff9b::10.0.0.1',
  '64:ff9b::a9fe:a9fe',
  '64:ff9b:1::808:808', // local-use NAT64: refused whatever it embeds
  '2001:0:808:808::f5ff:fffe', // Teredo, client 10.0.0.1 (inverted)
  '2001:0:a00:1::7f7f:fffe', // Teredo, server 10.0.0.1
];
