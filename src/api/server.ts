/**
 * The running service: a backend (uWebSockets.js or node:http, chosen at start), one router with
 * the API's routes and whatever else is mounted (the dashboard), one admission path, metrics, and
 * the drain on close (stop accepting, let admitted requests finish up to drainTimeout, then close
 * every connection).
 */
import type { Logger } from '../config/logger.js';
import { Admission } from '../http/admission.js';
import { loadBackend } from '../http/backend-select.js';
import { Metrics } from '../http/metrics.js';
import { Router } from '../http/router.js';
import type { Backend, BackendName } from '../http/types.js';
import { queueSize } from '../lib/index.js';
import type { Store } from '../store/index.js';
import { MAX_BODY_BYTES, tooLarge } from './metered-removal.js';
import { mountApi } from './routes.js';

/** What a mounted route group (the dashboard) gets from the service. */
export interface ServiceContext {
  router: Router;
  admission: Admission;
  metrics: Metrics;
  backend: BackendName;
}

export interface ServerOptions {
  host: string;
  port: number;
  /** 'auto' (default): uWebSockets.js where its binary loads, node:http elsewhere. */
  http?: 'auto' | BackendName | Backend;
  model?: string | undefined;
  queueLimit: number;
  overloadRetryAfter: number;
  drainTimeout: number;
  store: Store;
  logger: Logger;
  /** Registers more routes (e.g. the dashboard). */
  mount?: (context: ServiceContext) => void;
}

export interface RunningServer {
  port: number;
  backend: BackendName;
  metrics: Metrics;
  /** Stops accepting connections, waits for admitted requests (up to drainTimeout), closes the rest. */
  close(): Promise<void>;
  inFlight(): number;
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const { store, logger } = options;
  let backend: Backend;
  if (typeof options.http === 'object') backend = options.http;
  else {
    const chosen = loadBackend(options.http ?? 'auto');
    backend = chosen.backend;
    logger.info({ http: backend.name, reason: chosen.reason }, `HTTP backend: ${backend.name}`);
  }
  const metrics = new Metrics({ queueLength: queueSize, backend: backend.name });
  const router = new Router((route, status, code, seconds) => metrics.record(route, status, code, seconds), logger);
  const admission = new Admission(
    {
      queueLimit: options.queueLimit,
      overloadRetryAfter: options.overloadRetryAfter,
      maxBodyBytes: MAX_BODY_BYTES,
      rateLimits: store.rateLimits,
      logger,
    },
    tooLarge,
  );
  mountApi(router, { store, admission, metrics, backend: backend.name, model: options.model, logger });
  options.mount?.({ router, admission, metrics, backend: backend.name });

  const listener = await backend.listen(options.host, options.port, router.handle);
  let closing: Promise<void> | undefined;
  return {
    port: listener.port,
    backend: backend.name,
    metrics,
    inFlight: () => admission.inFlight,
    close: () => {
      closing ??= (async () => {
        const drained = admission.drain(options.drainTimeout * 1000);
        listener.stopAccepting();
        await drained;
        listener.closeAll();
      })();
      return closing;
    },
  };
}
