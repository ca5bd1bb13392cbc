/**
 * The running service: one router with the API's routes (open to pages of other origins as
 * options.cors says) and whatever else is mounted (the dashboard) on the backend the caller chose
 * (cli/serve.ts from BGONE_HTTP, through http/backend-select.ts: choosing is the start-up's
 * business, so the routes' folder needs no more of src/http than the router, the exchange and the
 * types), the service's rules (src/service: one admission path, the job memory gate, metrics), the
 * batch runner and the webhook worker, and the drain on close (stop accepting, let admitted
 * requests finish up to drainTimeout, then close every connection). Options left out take the
 * defaults of config/defaults.ts, the environment's.
 */

import { mountBatches } from './api/batch-routes.js';
import { mountApiCors } from './api/cors.js';
import { MAX_BODY_BYTES, tooLarge } from './api/metered-removal.js';
import { mountApi, mountMetrics } from './api/routes.js';
import { mountWebhooks } from './api/webhook-routes.js';
import { BatchMemoryBudget } from './batches/batch-memory-budget.js';
import { BatchRunner } from './batches/batch-runner.js';
import { ClaimWorker } from './cluster/claim-worker.js';
import { mountInternal } from './cluster/internal-routes.js';
import { PeerClient } from './cluster/peer-client.js';
import { PeerResults } from './cluster/peer-results.js';
import { type ClusterSecrets, publishedDigests } from './cluster/secret.js';
import { BATCH_DEFAULTS, type CorsOrigins, SERVICE_DEFAULTS } from './config/defaults.js';
import type { Logger } from './config/logger.js';
import type { BodyMinRate } from './http/exchange.js';
import { Router } from './http/router.js';
import type { Backend, BackendName, Listener } from './http/types.js';
import { queueSize } from './lib/index.js';
import { Admission } from './service/admission.js';
import type { ServiceContext } from './service/context.js';
import { JobMemoryGate } from './service/job-memory-gate.js';
import { Metrics } from './service/metrics.js';
import type { ModelsAllowed } from './service/model-access.js';
import type { Store } from './store/index.js';
import { WebhookDeliverer } from './webhooks/deliverer.js';

/** Async batches and their webhooks (config.ts BatchConfig, plus test knobs). */
export interface BatchServiceOptions {
  /** The base of result_url; default: http://<host>:<port> of this server. */
  publicUrl?: string | undefined;
  resultTtlSeconds: number;
  memoryMb: number;
  /** The percentage of memoryMb one account may hold (default: BGONE_BATCH_ACCOUNT_SHARE's). */
  accountSharePercent?: number | undefined;
  webhookAllowPrivate: boolean;
  /** How often the webhook outbox is polled when idle (default 1000 ms). */
  webhookPollMs?: number | undefined;
  /** A delivery not answered within this, its name's resolution included, fails (default 15 000 ms). */
  webhookTimeoutMs?: number | undefined;
  /** Delivered and failed deliveries are deleted this long after they ended (default: BATCH_DEFAULTS.webhookRetentionSeconds). */
  webhookRetentionSeconds?: number | undefined;
  /** DNS servers that resolve webhook endpoints' names instead of the system's (tests). */
  webhookDnsServers?: readonly string[] | undefined;
}

/** The batch options of a server started without any: the environment's defaults. */
export const DEFAULT_BATCH_OPTIONS: BatchServiceOptions = {
  resultTtlSeconds: BATCH_DEFAULTS.resultTtlSeconds,
  memoryMb: BATCH_DEFAULTS.memoryMb,
  webhookAllowPrivate: BATCH_DEFAULTS.webhookAllowPrivate,
};

export interface ServerOptions {
  host: string;
  port: number;
  /** The HTTP backend, chosen by the caller (loadBackend of http/backend-select.ts: BGONE_HTTP's choice). */
  http: Backend;
  model?: string | undefined;
  /** BGONE_MODELS_ALLOWED: the models a request may name besides the default ('all': every installed one). */
  modelsAllowed?: ModelsAllowed | undefined;
  queueLimit: number;
  overloadRetryAfter: number;
  drainTimeout: number;
  /** Seconds an admitted request's whole body may take to arrive (default: SERVICE_DEFAULTS.bodyTimeoutSeconds); then 408 and the connection closed. */
  bodyTimeout?: number | undefined;
  /** Admitted requests one account may hold at once (default: SERVICE_DEFAULTS.accountInFlight); beyond it 429. */
  accountInFlight?: number | undefined;
  /** Account reads (the balance routes) per minute, per key and per account (default: SERVICE_DEFAULTS.accountReadsPerMinute); apart from the plan's limit. */
  accountReadsPerMinute?: number | undefined;
  /** Bodies arriving at once (default: SERVICE_DEFAULTS.uploadLimit); beyond it 503. queueLimit counts the requests whose body is here. */
  uploadLimit?: number | undefined;
  /**
   * The least a body must bring a second, counted over windows of `windowMs` (default: SERVICE_DEFAULTS'
   * bodyMinRateBytesPerSecond over bodyRateWindowMs; 0 bytes: no minimum); less is 408 at the window's end.
   */
  bodyMinRate?: { bytesPerSecond: number; windowMs?: number | undefined } | undefined;
  /** The job memory gate: admission by estimated memory (default: SERVICE_DEFAULTS' memoryBudgetMb and memoryWaitSeconds). */
  memory?: { budgetMb: number; waitSeconds: number } | undefined;
  store: Store;
  logger: Logger;
  /** Registers more routes (e.g. the dashboard). */
  mount?: (context: ServiceContext) => void;
  /**
   * BGONE_CORS_ORIGINS: which pages of other origins may call the API's routes (api/cors.ts): '*'
   * (default: SERVICE_DEFAULTS.corsOrigins), the origins listed, or 'off' (no CORS at all).
   */
  cors?: CorsOrigins | undefined;
  /** Default: DEFAULT_BATCH_OPTIONS. */
  batches?: BatchServiceOptions | undefined;
  /**
   * Several nodes sharing batch work (needs a store with a cluster, i.e. PostgreSQL): the secret
   * of the internal routes (and the previous one during a rotation), and the address peers reach
   * this node on (default: its listen address).
   */
  cluster?: { secret: string; previousSecret?: string | undefined; internalUrl?: string | undefined } | undefined;
  /**
   * Where GET /metrics is served (docs/operations.md, "Metrics"): `listen`, a listener of its own
   * that serves only it, on backend `http` (default: the server's); `token`, the public port serves
   * it to `Authorization: Bearer <token>`. Without either, the public port answers /metrics as an
   * unknown path.
   */
  metrics?: { listen?: { host: string; port: number } | undefined; http?: Backend | undefined; token?: string | undefined } | undefined;
}

export interface RunningServer {
  port: number;
  /** The port of the metrics listener (options.metrics.listen), when it listens. */
  metricsPort: number | undefined;
  backend: BackendName;
  metrics: Metrics;
  /** Stops accepting connections, waits for admitted requests (up to drainTimeout), closes the rest. */
  close(): Promise<void>;
  inFlight(): number;
  /** Bytes moved to and from other nodes (image inputs and results). */
  peerTraffic(): { bytesIn: number; bytesOut: number };
}

function bodyMinRate(option: ServerOptions['bodyMinRate']): BodyMinRate {
  const windowMs = option?.windowMs ?? SERVICE_DEFAULTS.bodyRateWindowMs;
  return { windowMs, bytesPerWindow: Math.ceil(((option?.bytesPerSecond ?? SERVICE_DEFAULTS.bodyMinRateBytesPerSecond) * windowMs) / 1000) };
}

/** How long close() lets the answers written last leave the process before it closes every connection. */
const CLOSE_FLUSH_GRACE_MS = 200;

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const { store, logger, http: backend } = options;
  const metrics = new Metrics({ queueLength: queueSize, backend: backend.name });
  const router = new Router((route, status, code, seconds) => metrics.record(route, status, code, seconds), logger);
  const admission = new Admission(
    {
      queueLimit: options.queueLimit,
      overloadRetryAfter: options.overloadRetryAfter,
      maxBodyBytes: MAX_BODY_BYTES,
      rateLimits: store.rateLimits,
      credits: store.credits,
      accountInFlight: options.accountInFlight ?? SERVICE_DEFAULTS.accountInFlight,
      accountReadsPerMinute: options.accountReadsPerMinute ?? SERVICE_DEFAULTS.accountReadsPerMinute,
      bodyTimeoutMs: (options.bodyTimeout ?? SERVICE_DEFAULTS.bodyTimeoutSeconds) * 1000,
      uploadLimit: options.uploadLimit ?? SERVICE_DEFAULTS.uploadLimit,
      bodyMinRate: bodyMinRate(options.bodyMinRate),
      logger,
    },
    tooLarge,
  );
  const batchOptions = options.batches ?? DEFAULT_BATCH_OPTIONS;
  const deliverer = new WebhookDeliverer({
    store,
    logger,
    allowPrivate: batchOptions.webhookAllowPrivate,
    pollIntervalMs: batchOptions.webhookPollMs,
    timeoutMs: batchOptions.webhookTimeoutMs,
    retentionMs: batchOptions.webhookRetentionSeconds === undefined ? undefined : batchOptions.webhookRetentionSeconds * 1000,
    dnsServers: batchOptions.webhookDnsServers,
  });
  const webhookEventWritten = () => deliverer.poke();
  // Known once listening: the default base of result_url is this server's own address.
  let publicUrl = batchOptions.publicUrl ?? '';
  const budgetBytes = batchOptions.memoryMb * 1024 * 1024;
  const budget = new BatchMemoryBudget(budgetBytes, Math.floor((budgetBytes * (batchOptions.accountSharePercent ?? BATCH_DEFAULTS.accountSharePercent)) / 100));
  const memory = new JobMemoryGate({
    budgetBytes: (options.memory?.budgetMb ?? SERVICE_DEFAULTS.memoryBudgetMb) * 1024 * 1024,
    maxWaitMs: (options.memory?.waitSeconds ?? SERVICE_DEFAULTS.memoryWaitSeconds) * 1000,
  });
  // Several nodes: the internal routes, the peer calls and the claiming of idle work (src/cluster).
  const clusterStore = options.cluster ? store.cluster : undefined;
  const secrets: ClusterSecrets | undefined = options.cluster ? { current: options.cluster.secret, previous: options.cluster.previousSecret } : undefined;
  const runner = new BatchRunner({
    store,
    budget,
    resultTtlMs: batchOptions.resultTtlSeconds * 1000,
    memory,
    publicUrl: () => publicUrl,
    logger,
    metrics,
    onEvent: webhookEventWritten,
    imageState: clusterStore ? (imageId) => clusterStore.imageState(imageId) : undefined,
  });
  const peerClient = clusterStore ? new PeerClient(secrets!) : undefined;
  const peerResults = clusterStore && peerClient ? new PeerResults(clusterStore, peerClient) : undefined;
  if (peerClient) mountInternal(router, { secrets: secrets!, runner, peers: peerClient });
  const claimWorker =
    clusterStore && peerClient
      ? new ClaimWorker({ store, cluster: clusterStore, runner, peers: peerClient, logger, onEvent: webhookEventWritten, busy: () => queueSize() > 0 })
      : undefined;
  mountApi(router, {
    store,
    admission,
    metrics,
    backend: backend.name,
    model: options.model,
    modelsAllowed: options.modelsAllowed,
    logger,
    batchQueue: () => runner.queued,
    peerTraffic: peerClient ? () => peerClient.traffic : undefined,
    memory,
    overloadRetryAfter: options.overloadRetryAfter,
    metricsToken: options.metrics?.token,
  });
  mountBatches(router, {
    peers: peerResults,
    store,
    admission,
    runner,
    budget,
    resultTtlMs: batchOptions.resultTtlSeconds * 1000,
    publicUrl: () => publicUrl,
    overloadRetryAfter: options.overloadRetryAfter,
    model: options.model,
    modelsAllowed: options.modelsAllowed,
    logger,
    onEvent: webhookEventWritten,
  });
  mountWebhooks(router, { store, admission, allowPrivate: batchOptions.webhookAllowPrivate, logger, onEvent: webhookEventWritten });
  const cors = options.cors ?? SERVICE_DEFAULTS.corsOrigins;
  if (cors !== 'off') mountApiCors(router, cors);
  options.mount?.({ router, admission, metrics, backend: backend.name, webhookEventWritten, memory });

  const listener = await backend.listen(options.host, options.port, router.handle, router.earlyAnswer);
  const metricsListener = await listenForMetrics(options, metrics);
  if (!publicUrl) {
    const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
    publicUrl = `http://${host.includes(':') ? `[${host}]` : host}:${listener.port}`;
  }
  if (clusterStore && claimWorker) {
    const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
    const internalUrl = options.cluster!.internalUrl ?? `http://${host.includes(':') ? `[${host}]` : host}:${listener.port}`;
    try {
      // Refused (ClusterSecretMismatch) where a live node accepts none of this node's secrets.
      await clusterStore.announce(internalUrl, publishedDigests(secrets!));
    } catch (err) {
      listener.stopAccepting();
      listener.closeAll();
      await runner.close();
      throw err;
    }
    claimWorker.start();
  }
  deliverer.start();
  let closing: Promise<void> | undefined;
  return {
    port: listener.port,
    metricsPort: metricsListener?.port,
    backend: backend.name,
    metrics,
    peerTraffic: () => ({ ...(peerClient?.traffic ?? { bytesIn: 0, bytesOut: 0 }) }),
    inFlight: () => admission.inFlight,
    close: () => {
      closing ??= (async () => {
        const drained = admission.drain(options.drainTimeout * 1000);
        listener.stopAccepting();
        await drained;
        // The last answers were written just before their places were given back; uWS's close
        // drops a socket's unsent bytes, so they get a moment to leave before every connection ends.
        await new Promise((resolve) => setTimeout(resolve, CLOSE_FLUSH_GRACE_MS));
        listener.closeAll();
        metricsListener?.closeAll();
        await claimWorker?.stop();
        // Batch images still queued are failed (not charged, their events written); then the
        // worker sends what it has in hand. The outbox keeps the rest for the next start.
        await runner.close();
        deliverer.poke();
        await deliverer.stop();
      })();
      return closing;
    },
  };
}

/**
 * The metrics listener: GET /metrics only. A scrape port that cannot be bound (a second node on the
 * same host with the same setting) is logged and left out: the service runs on without it.
 */
async function listenForMetrics(options: ServerOptions, metrics: Metrics): Promise<Listener | undefined> {
  const at = options.metrics?.listen;
  if (!at) return undefined;
  const router = new Router(() => {}, options.logger);
  mountMetrics(router, metrics);
  try {
    return await (options.metrics?.http ?? options.http).listen(at.host, at.port, router.handle);
  } catch (err) {
    options.logger.warn({ err }, `metrics: cannot listen on ${at.host}:${at.port}; GET /metrics is not served on this node`);
    return undefined;
  }
}
