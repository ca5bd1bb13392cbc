/**
 * A real bgone server with the dashboard mounted (startServer with mount → mountDashboard) on an
 * ephemeral port of 127.0.0.1, over a fresh SQLite file in its own temp folder. The store runs on a
 * test clock that the test moves forward (sessions, cycles, cancellations and the login limiter all
 * read it), so expiry is tested without sleeping.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { type DashboardDeps, mountDashboard } from '../../src/dashboard/index.js';
import type { RunningServer } from '../../src/server.js';
import { openStore, type RateLimits, type Store } from '../../src/store/index.js';
import { serveStore } from './server.js';

/** A clock that only moves when told to. */
export class TestClock {
  constructor(public ms: number) {}
  readonly now = (): Date => new Date(this.ms);
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface DashboardServerOptions extends Partial<Omit<DashboardDeps, 'store' | 'metrics' | 'logger'>> {
  /** Start of the test clock (default 2026-03-10T12:00:00Z). */
  start?: Date;
  rateLimits?: RateLimits;
  /** Session lifetime (the store's; default 12 h). */
  sessionTtlMs?: number;
}

export interface DashboardServer {
  /** e.g. http://127.0.0.1:40123 */
  url: string;
  store: Store;
  clock: TestClock;
  server: RunningServer;
  dir: string;
  close(): Promise<void>;
}

export const TEST_START = new Date('2026-03-10T12:00:00.000Z');

export async function startDashboardServer(options: DashboardServerOptions = {}): Promise<DashboardServer> {
  const dir = mkdtempSync(join(tmpdir(), 'bgone-dashboard-'));
  const clock = new TestClock((options.start ?? TEST_START).getTime());
  const store = await openStore({
    path: join(dir, 'db.sqlite'),
    clock: clock.now,
    rateLimits: options.rateLimits,
    lastUsedResolutionMs: 0,
    sessionTtlMs: options.sessionTtlMs,
  });
  const logger = createLogger('silent');
  const { start: _start, rateLimits: _rateLimits, sessionTtlMs: _sessionTtlMs, ...dashboard } = options;
  try {
    const { server, close } = await serveStore(store, dir, {
      queueLimit: 8,
      logger,
      mount: (context) => mountDashboard(context, { store, logger, ...dashboard }),
    });
    return { url: `http://127.0.0.1:${server.port}`, store, clock, server, dir, close };
  } catch (err) {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * For a test file: `server(options)` starts a dashboard server that is closed after the test that
 * started it (every server of the test, in parallel).
 */
export function useDashboardServers(): (options?: DashboardServerOptions) => Promise<DashboardServer> {
  let servers: DashboardServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.map((s) => s.close()));
    servers = [];
  });
  return async (options = {}) => {
    const s = await startDashboardServer(options);
    servers.push(s);
    return s;
  };
}
