/**
 * The service's Prometheus metrics on prom-client: request counts by route, status and code, the
 * latency of POST /api/v1/remove, inference time, the native queue's length, which HTTP backend
 * serves, which execution provider runs inference, and prom-client's default process metrics (CPU, memory, event loop, GC, handles).
 *
 * Each Metrics has its own Registry, so that several servers in one process (the tests) count
 * separately. The default process metrics are collected once per process and shared by every
 * registry: each collectDefaultMetrics call starts an event-loop-delay monitor and a GC observer
 * that prom-client never stops, so one per server would pile up for the life of the process; and
 * they describe the process, which every server in it shares anyway.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { BackendName } from '../http/types.js';
import { loadedModels, providerInUse } from '../lib/models.js';
import { librarySettings } from '../lib/settings.js';

export interface MetricsOptions {
  /** Jobs running or waiting in the native core, read at each scrape. */
  queueLength: () => number;
  /** The HTTP backend serving this process, shown as bgone_http_backend_info{backend}. */
  backend: BackendName;
}

/** The only route whose latency is a histogram; every route is counted. */
export const LATENCY_ROUTE = '/api/v1/remove';
const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64];
const INFERENCE_BUCKETS = [0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8, 16];

let processMetrics: Registry | undefined;

/** The registry of the default process metrics, created on first use (never at import time). */
function processRegistry(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

export class Metrics {
  /** The Content-Type of render()'s text (Prometheus text format 0.0.4). */
  readonly contentType: string;
  private readonly registry: Registry;
  private readonly requests: Counter<'route' | 'status' | 'code'>;
  private readonly latency: Histogram;
  private readonly inference: Histogram;

  constructor(options: MetricsOptions) {
    const own = new Registry();
    this.requests = new Counter({
      name: 'bgone_requests_total',
      help: 'HTTP requests by route, status and code.',
      labelNames: ['route', 'status', 'code'],
      registers: [own],
    });
    this.latency = new Histogram({
      name: 'bgone_request_duration_seconds',
      help: 'Latency of POST /api/v1/remove.',
      buckets: LATENCY_BUCKETS,
      registers: [own],
    });
    this.inference = new Histogram({
      name: 'bgone_inference_seconds',
      help: 'Model inference time per image.',
      buckets: INFERENCE_BUCKETS,
      registers: [own],
    });
    new Gauge({
      name: 'bgone_queue_length',
      help: 'Jobs running or waiting in the native core.',
      registers: [own],
      collect() {
        this.set(options.queueLength());
      },
    });
    new Gauge({
      name: 'bgone_model_resident_bytes',
      help: 'Memory each loaded model session holds for its life (its weights, on the CPU), by model.',
      labelNames: ['model'],
      registers: [own],
      collect() {
        this.reset();
        for (const { model, bytes } of loadedModels()) this.set({ model }, bytes);
      },
    });
    new Gauge({
      name: 'bgone_execution_provider_info',
      help:
        'The execution provider running inference (cpu, cuda, tensorrt, webgpu), its GPU index (empty without one) and the ' +
        'configured list (BGONE_EXECUTION_PROVIDER); always 1, absent until a model has loaded with a fall-back list.',
      labelNames: ['provider', 'device_id', 'configured'],
      registers: [own],
      collect() {
        this.reset();
        const state = providerInUse();
        if (!state) return;
        const { provider, deviceId } = state.choice;
        const gpuIndex = provider === 'cuda' || provider === 'tensorrt' ? String(deviceId) : '';
        this.set({ provider, device_id: gpuIndex, configured: librarySettings().executionProvider }, 1);
      },
    });
    const backend = new Gauge({
      name: 'bgone_http_backend_info',
      help: 'The HTTP backend serving requests (uws: uWebSockets.js, node: node:http); always 1.',
      labelNames: ['backend'],
      registers: [own],
    });
    backend.set({ backend: options.backend }, 1);
    // merge() registers the same metric objects in a new registry: the process metrics stay shared.
    this.registry = Registry.merge([own, processRegistry()]);
    this.contentType = this.registry.contentType;
  }

  /** One finished request: its route, status code, error code (or 'ok') and seconds taken. */
  record(route: string, status: number, code: string, seconds: number): void {
    this.requests.inc({ route, status: String(status), code });
    if (route === LATENCY_ROUTE) this.latency.observe(seconds);
  }

  /** One model inference, in seconds. */
  recordInference(seconds: number): void {
    this.inference.observe(seconds);
  }

  /** The whole registry in the Prometheus text format. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
