/**
 * What a mounted route group (the dashboard) gets from the service: the router, the admission,
 * the metrics, the job memory gate, and how to wake the webhook worker. The composition root
 * (src/server.ts) builds it.
 */
import type { Router } from '../http/router.js';
import type { BackendName } from '../http/types.js';
import type { Admission } from './admission.js';
import type { JobMemoryGate } from './job-memory-gate.js';
import type { Metrics } from './metrics.js';

/** What a mounted route group (the dashboard) gets from the service. */
export interface ServiceContext {
  router: Router;
  admission: Admission;
  metrics: Metrics;
  backend: BackendName;
  /** Tells the webhook worker that an event was written (it polls the outbox at once). */
  webhookEventWritten: () => void;
  /** The job memory gate (admission by estimated memory), shared by every route that runs a job. */
  memory: JobMemoryGate;
}
