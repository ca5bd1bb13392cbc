/**
 * A real DNS server on 127.0.0.1 (UDP) for the webhook tests: it answers A and AAAA queries for the
 * names a test gives it, NXDOMAIN for any other name, and never answers the names marked `hang`
 * (a name whose servers are down). The deliverer is pointed at it instead of the system's servers.
 */
import { createSocket, type Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';

export interface DnsRecords {
  a?: string[];
  aaaa?: string[];
  /** Queries for the name get no answer at all. */
  hang?: boolean;
}

export interface DnsServer {
  /** `127.0.0.1:port`, as dns.Resolver.setServers takes it. */
  readonly address: string;
  readonly records: Map<string, DnsRecords>;
  /** Queries seen, as `name TYPE`. */
  readonly queries: string[];
  close(): Promise<void>;
}

const TYPE_A = 1;
const TYPE_AAAA = 28;

/** The 16 bytes of an IPv6 address (written here independently of the code under test). */
function ipv6Bytes(address: string): Buffer {
  const [head = '', tail = ''] = address.split('::');
  const groups = (text: string) => (text ? text.split(':') : []);
  const h = groups(head);
  const t = address.includes('::') ? groups(tail) : [];
  const all = [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  for (const [i, g] of all.entries()) out.writeUInt16BE(Number.parseInt(g, 16), i * 2);
  return out;
}

function ipv4Bytes(address: string): Buffer {
  return Buffer.from(address.split('.').map(Number));
}

/** The question's name, type and the offset after it; null for a query it cannot read. */
function question(msg: Buffer): { name: string; type: number; end: number } | null {
  const labels: string[] = [];
  let at = 12;
  while (at < msg.length) {
    const len = msg[at]!;
    if (len === 0) break;
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('ascii'));
    at += 1 + len;
  }
  if (at + 5 > msg.length) return null;
  return { name: labels.join('.').toLowerCase(), type: msg.readUInt16BE(at + 1), end: at + 5 };
}

function answer(query: Buffer, q: { name: string; type: number; end: number }, records: DnsRecords | undefined): Buffer {
  const rdatas = !records ? [] : q.type === TYPE_A ? (records.a ?? []).map(ipv4Bytes) : q.type === TYPE_AAAA ? (records.aaaa ?? []).map(ipv6Bytes) : [];
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2); // the id
  header.writeUInt16BE(0x8180 | (records ? 0 : 3), 2); // a response, recursion available; NXDOMAIN for unknown names
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(rdatas.length, 6);
  const rrs = rdatas.map((rdata) => {
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0); // the question's name
    rr.writeUInt16BE(q.type, 2);
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(60, 6);
    rr.writeUInt16BE(rdata.length, 10);
    return Buffer.concat([rr, rdata]);
  });
  return Buffer.concat([header, query.subarray(12, q.end), ...rrs]);
}

export async function startDnsServer(records: Record<string, DnsRecords> = {}): Promise<DnsServer> {
  const socket: Socket = createSocket('udp4');
  const server: DnsServer = {
    address: '',
    records: new Map(Object.entries(records).map(([name, r]) => [name.toLowerCase(), r])),
    queries: [],
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
  socket.on('message', (msg, peer) => {
    const q = question(msg);
    if (!q) return;
    server.queries.push(`${q.name} ${q.type === TYPE_A ? 'A' : q.type === TYPE_AAAA ? 'AAAA' : q.type}`);
    const found = server.records.get(q.name);
    if (found?.hang) return;
    socket.send(answer(msg, q, found), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  Object.assign(server, { address: `127.0.0.1:${(socket.address() as AddressInfo).port}` });
  return server;
}
