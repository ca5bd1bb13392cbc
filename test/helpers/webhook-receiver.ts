/**
 * A real webhook receiver on 127.0.0.1 for the batch and webhook tests: it records every delivery
 * (headers, body), verifies its signature with the `standardwebhooks` package (an implementation
 * of the specification independent of ours), and answers with the status codes a test scripts.
 * It can be stopped and started again on the same port, to play a receiver that is down. A stuck
 * receiver accepts connections and never answers.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedEvent {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  /** The parsed body: { type, timestamp, data }. */
  event: { type: string; timestamp: string; data: Record<string, any> };
  /** Whether standardwebhooks accepted the signature (set once a secret is known). */
  verified: boolean;
  /** The status answered. */
  status: number;
}

export interface WebhookReceiver {
  readonly url: string;
  readonly port: number;
  readonly received: ReceivedEvent[];
  /** The secret its signatures are verified with (set after creating the endpoint). */
  secret: string;
  /** Status codes to answer, in order; 200 once they run out. */
  script: number[];
  /** The events of one type, answered 2xx. */
  delivered(type: string): ReceivedEvent[];
  stop(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
}

function readAll(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedEvent[] = [];
  let server: Server;
  const receiver: WebhookReceiver = {
    url: '',
    port: 0,
    received,
    secret: '',
    script: [],
    delivered: (type) => received.filter((r) => r.event.type === type && r.status >= 200 && r.status < 300),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())).then(() => undefined),
    restart: () => listen(receiver.port),
  };
  const handler = async (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    const body = await readAll(req);
    const headers = {
      'webhook-id': String(req.headers['webhook-id']),
      'webhook-timestamp': String(req.headers['webhook-timestamp']),
      'webhook-signature': String(req.headers['webhook-signature']),
    };
    let verified = false;
    try {
      new Webhook(receiver.secret).verify(body, headers);
      verified = true;
    } catch {}
    const status = receiver.script.shift() ?? 200;
    received.push({
      id: headers['webhook-id'],
      timestamp: headers['webhook-timestamp'],
      signature: headers['webhook-signature'],
      body,
      event: JSON.parse(body),
      verified,
      status,
    });
    res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
  };
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server = createServer((req, res) => void handler(req, res));
      server.keepAliveTimeout = 1;
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        const address = server.address() as AddressInfo;
        Object.assign(receiver, { port: address.port, url: `http://127.0.0.1:${address.port}/hooks` });
        resolve();
      });
    });
  await listen(0);
  return receiver;
}

/** A receiver that accepts connections and never answers: an endpoint stuck for good. */
export interface StuckReceiver {
  readonly url: string;
  /** Connections open now, and the most that were open at once. */
  readonly open: number;
  readonly maxOpen: number;
  /** Connections accepted in all. */
  readonly accepted: number;
  /** Closes the listener and every connection it holds (the attempts end at once). */
  stop(): Promise<void>;
}

export async function startStuckReceiver(): Promise<StuckReceiver> {
  const sockets = new Set<import('node:net').Socket>();
  let maxOpen = 0;
  let accepted = 0;
  const server = createNetServer((socket) => {
    accepted++;
    sockets.add(socket);
    maxOpen = Math.max(maxOpen, sockets.size);
    socket.on('data', () => {}); // reads the request, answers nothing
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/stuck`,
    get open() {
      return sockets.size;
    },
    get maxOpen() {
      return maxOpen;
    },
    get accepted() {
      return accepted;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
