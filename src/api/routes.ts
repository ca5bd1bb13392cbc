/**
 * The public API's routes: POST /api/v1/remove, remove.bg's and Photoroom's dialects of it (dialects/), plus health, readiness, metrics and the OpenAPI
 * document. The remove route only authenticates (by API key), admits (service/admission.ts) and
 * meters (metered-removal.ts); the image work is the library's removeBackground.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Logger } from '../config/logger.js';
import type { Router } from '../http/router.js';
import type { BackendName } from '../http/types.js';
import { concurrencyInUse, inferenceProviders, queueSize } from '../lib/index.js';
import type { Admission } from '../service/admission.js';
import { ApiError } from '../service/errors.js';
import type { JobMemoryGate } from '../service/job-memory-gate.js';
import type { Metrics } from '../service/metrics.js';
import type { ModelsAllowed } from '../service/model-access.js';
import type { Store } from '../store/index.js';
import { principalOfApiKey } from './api-key.js';
import { mountPhotoroom } from './dialects/photoroom.js';
import { mountPhotoroomV2 } from './dialects/photoroom-v2.js';
import { mountRemoveBg } from './dialects/removebg.js';
import { MAX_BODY_BYTES, removalHandler } from './metered-removal.js';
import { openApiDocument } from './openapi.js';

export const REMOVE_PATH = '/api/v1/remove';

export interface ApiDeps {
  store: Store;
  admission: Admission;
  metrics: Metrics;
  backend: BackendName;
  model?: string | undefined;
  /** BGONE_MODELS_ALLOWED: the models a request may name besides the default. */
  modelsAllowed?: ModelsAllowed | undefined;
  logger?: Logger | undefined;
  /** Batch images waiting on this node (shown by /readyz). */
  batchQueue?: () => number;
  memory?: JobMemoryGate | undefined;
  overloadRetryAfter?: number | undefined;
  /** Several nodes: the bytes this node moved to and from its peers (shown by /readyz). */
  peerTraffic?: (() => { bytesIn: number; bytesOut: number }) | undefined;
  /** GET /metrics is served on this router to `Authorization: Bearer <metricsToken>` only; without it, not at all. */
  metricsToken?: string | undefined;
}

/**
 * GET /metrics (Prometheus). With `token`, only to `Authorization: Bearer <token>`: any other
 * request gets the answer of an unknown path, so the public port tells nothing of it.
 */
export function mountMetrics(router: Router, metrics: Metrics, token?: string): void {
  const expected = token === undefined ? undefined : createHash('sha256').update(`Bearer ${token}`).digest();
  router.get('/metrics', async (ex) => {
    if (expected && !timingSafeEqual(createHash('sha256').update(ex.req.header('authorization')).digest(), expected)) {
      ex.error(new ApiError('not_found'));
      return;
    }
    const body = await metrics.render();
    ex.send(200, { 'Content-Type': metrics.contentType, 'Cache-Control': 'no-store' }, body);
  });
}

export function mountApi(router: Router, deps: ApiDeps): void {
  const { store, admission, metrics, logger } = deps;
  // Where inference runs: the provider in use (the model loaded with it, or the service would not
  // have started), the configured list, those of it skipped, the providers the loaded ONNX Runtime
  // was built with, and the jobs let inside the native core at once.
  const inference = () => {
    try {
      const { provider, deviceId, device, configured, skipped, available } = inferenceProviders();
      return { provider, device_id: deviceId, device, configured, skipped, available, native_concurrency: concurrencyInUse() };
    } catch (err) {
      logger?.warn({ err }, 'readiness: the native core does not answer');
      return null;
    }
  };

  router.post(
    REMOVE_PATH,
    removalHandler({
      admission,
      removal: {
        store,
        model: deps.model,
        modelsAllowed: deps.modelsAllowed,
        logger,
        metrics,
        memory: deps.memory,
        overloadRetryAfter: deps.overloadRetryAfter,
      },
      authenticate: (ex) => principalOfApiKey(store, ex),
      unauthenticated: new ApiError('authentication_error'),
    }),
  );

  mountRemoveBg(router, { ...deps, maxBodyBytes: MAX_BODY_BYTES });
  mountPhotoroom(router, deps);
  mountPhotoroomV2(router, deps);

  router.get('/healthz', (ex) => ex.json(200, { status: 'ok' }));
  // Ready: not draining, and the database answers (a load balancer takes a node whose database is
  // unreachable out of rotation; it comes back by itself once the database answers again).
  router.get('/readyz', async (ex) => {
    const about = { http_backend: deps.backend, database: store.kind };
    if (admission.isDraining) return ex.json(503, { status: 'draining', ...about });
    try {
      await store.ping();
    } catch (err) {
      logger?.warn({ err }, 'readiness: the database does not answer');
      return ex.json(503, { status: 'database_unreachable', ...about });
    }
    ex.json(200, {
      status: 'ready',
      ...about,
      inference: inference(),
      queue: queueSize(),
      in_flight: admission.inFlight,
      batch_queue: deps.batchQueue?.() ?? 0,
      peer_bytes: deps.peerTraffic ? { in: deps.peerTraffic().bytesIn, out: deps.peerTraffic().bytesOut } : null,
      memory: deps.memory
        ? { budget_mb: Math.round(deps.memory.budget / 2 ** 20), used_mb: Math.round(deps.memory.used / 2 ** 20), waiting: deps.memory.waiting }
        : null,
    });
  });
  if (deps.metricsToken !== undefined) mountMetrics(router, metrics, deps.metricsToken);
  router.get('/api/v1/openapi.json', (ex) => ex.json(200, openApiDocument(), { 'Cache-Control': 'public, max-age=300' }));
}
