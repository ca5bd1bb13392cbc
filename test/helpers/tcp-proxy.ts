/**
 * A TCP proxy on 127.0.0.1 in front of a server (the test PostgreSQL, a node's internal routes), to
 * cut a client off from it and bring it back: an outage as the client sees it (connections
 * dropped, new ones closed at once) without stopping the server that other tests share.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  private readonly sockets = new Set<Socket>();
  private cutOff = false;
  /** Where new connections go: forwardTo() changes it (a server whose port is known only once it listens). */
  private targetPort: number;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    targetPort: number,
  ) {
    this.targetPort = targetPort;
  }

  /** Listens on an ephemeral loopback port and forwards each connection to targetHost:targetPort. */
  static async start(targetHost: string, targetPort: number): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const server = createServer((client) => proxy!.accept(client, targetHost, proxy!.targetPort));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy = new TcpProxy(server, (server.address() as { port: number }).port, targetPort);
    return proxy;
  }

  private accept(client: Socket, host: string, port: number): void {
    if (this.cutOff) {
      client.destroy();
      return;
    }
    const upstream = connect(port, host);
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(a);
      a.pipe(b);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        this.sockets.delete(a);
        b.destroy();
      });
    }
  }

  /** Drops every open connection and closes new ones at once, until restore(). */
  cut(): void {
    this.cutOff = true;
    for (const socket of this.sockets) socket.destroy();
  }

  restore(): void {
    this.cutOff = false;
  }

  /** New connections go to targetHost:port from now on. */
  forwardTo(port: number): void {
    this.targetPort = port;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
