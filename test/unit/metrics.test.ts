/**
 * The service's Prometheus metrics (src/service/metrics.ts, on prom-client): what render() shows after
 * record() and recordInference() calls, the queue length read at scrape time, the HTTP backend,
 * the execution provider in use, prom-client's default process metrics, and two instances counting
 * apart.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { configure, DEFAULT_SETTINGS } from '../../src/lib/index.js';
import { Metrics } from '../../src/service/metrics.js';

const REMOVE = '/api/v1/remove';

function metrics(queue = () => 0, backend: 'uws' | 'node' = 'uws') {
  return new Metrics({ queueLength: queue, backend });
}

/** The sample lines of one metric family (name, name_bucket, name_sum...), without HELP/TYPE. */
function samples(text: string, name: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `) || line.startsWith(`${name}_`));
}

describe('bgone_requests_total', () => {
  it('counts requests by route, status and code', async () => {
    const m = metrics();
    m.record(REMOVE, 200, 'ok', 1.5);
    m.record(REMOVE, 200, 'ok', 2.5);
    m.record(REMOVE, 429, 'rate_limit_exceeded', 0.001);
    m.record('/healthz', 200, 'ok', 0.0002);
    m.record(REMOVE, 499, 'client_aborted', 0.3);
    const text = await m.render();
    expect(text).toContain('# HELP bgone_requests_total HTTP requests by route, status and code.\n# TYPE bgone_requests_total counter\n');
    expect(samples(text, 'bgone_requests_total')).toEqual([
      'bgone_requests_total{route="/api/v1/remove",status="200",code="ok"} 2',
      'bgone_requests_total{route="/api/v1/remove",status="429",code="rate_limit_exceeded"} 1',
      'bgone_requests_total{route="/healthz",status="200",code="ok"} 1',
      'bgone_requests_total{route="/api/v1/remove",status="499",code="client_aborted"} 1',
    ]);
  });

  it('shows no sample before the first request', async () => {
    const text = await metrics().render();
    expect(text).toContain('# TYPE bgone_requests_total counter');
    expect(samples(text, 'bgone_requests_total')).toEqual([]);
  });
});

describe('bgone_request_duration_seconds', () => {
  it('is a histogram of POST /api/v1/remove only, in the latency buckets', async () => {
    const m = metrics();
    m.record(REMOVE, 200, 'ok', 0.3);
    m.record(REMOVE, 400, 'validation_error', 0.05);
    m.record(REMOVE, 200, 'ok', 100);
    m.record('/dashboard', 200, 'ok', 0.3); // counted, not timed
    const text = await m.render();
    expect(text).toContain('# TYPE bgone_request_duration_seconds histogram');
    expect(samples(text, 'bgone_request_duration_seconds')).toEqual([
      'bgone_request_duration_seconds_bucket{le="0.05"} 1',
      'bgone_request_duration_seconds_bucket{le="0.1"} 1',
      'bgone_request_duration_seconds_bucket{le="0.25"} 1',
      'bgone_request_duration_seconds_bucket{le="0.5"} 2',
      'bgone_request_duration_seconds_bucket{le="1"} 2',
      'bgone_request_duration_seconds_bucket{le="2"} 2',
      'bgone_request_duration_seconds_bucket{le="4"} 2',
      'bgone_request_duration_seconds_bucket{le="8"} 2',
      'bgone_request_duration_seconds_bucket{le="16"} 2',
      'bgone_request_duration_seconds_bucket{le="32"} 2',
      'bgone_request_duration_seconds_bucket{le="64"} 2',
      'bgone_request_duration_seconds_bucket{le="+Inf"} 3',
      'bgone_request_duration_seconds_sum 100.35',
      'bgone_request_duration_seconds_count 3',
    ]);
  });
});

describe('bgone_inference_seconds', () => {
  it('is a histogram of inference times in the inference buckets', async () => {
    const m = metrics();
    m.recordInference(1.25);
    m.recordInference(5);
    const text = await m.render();
    expect(text).toContain('# TYPE bgone_inference_seconds histogram');
    expect(samples(text, 'bgone_inference_seconds')).toEqual([
      'bgone_inference_seconds_bucket{le="0.25"} 0',
      'bgone_inference_seconds_bucket{le="0.5"} 0',
      'bgone_inference_seconds_bucket{le="1"} 0',
      'bgone_inference_seconds_bucket{le="1.5"} 1',
      'bgone_inference_seconds_bucket{le="2"} 1',
      'bgone_inference_seconds_bucket{le="3"} 1',
      'bgone_inference_seconds_bucket{le="4"} 1',
      'bgone_inference_seconds_bucket{le="6"} 2',
      'bgone_inference_seconds_bucket{le="8"} 2',
      'bgone_inference_seconds_bucket{le="16"} 2',
      'bgone_inference_seconds_bucket{le="+Inf"} 2',
      'bgone_inference_seconds_sum 6.25',
      'bgone_inference_seconds_count 2',
    ]);
  });
});

describe('gauges', () => {
  it('reads bgone_queue_length at each scrape', async () => {
    let queue = 3;
    const m = metrics(() => queue);
    expect(samples(await m.render(), 'bgone_queue_length')).toEqual(['bgone_queue_length 3']);
    queue = 0;
    expect(samples(await m.render(), 'bgone_queue_length')).toEqual(['bgone_queue_length 0']);
  });

  it.each(['uws', 'node'] as const)('shows the %s backend as bgone_http_backend_info', async (backend) => {
    const text = await metrics(() => 0, backend).render();
    expect(text).toContain('# TYPE bgone_http_backend_info gauge');
    expect(samples(text, 'bgone_http_backend_info')).toEqual([`bgone_http_backend_info{backend="${backend}"} 1`]);
  });
});

describe('bgone_execution_provider_info', () => {
  afterAll(() => {
    configure(DEFAULT_SETTINGS);
  });

  it('names the provider in use, its GPU index and the configured list, read at scrape time', async () => {
    const m = metrics();
    const text = await m.render();
    expect(text).toContain('# TYPE bgone_execution_provider_info gauge');
    expect(samples(text, 'bgone_execution_provider_info')).toEqual(['bgone_execution_provider_info{provider="cpu",device_id="",configured="cpu"} 1']);
    configure({ executionProvider: 'cuda:2' });
    expect(samples(await m.render(), 'bgone_execution_provider_info')).toEqual([
      'bgone_execution_provider_info{provider="cuda",device_id="2",configured="cuda:2"} 1',
    ]);
    configure({ executionProvider: 'webgpu' });
    expect(samples(await m.render(), 'bgone_execution_provider_info')).toEqual([
      'bgone_execution_provider_info{provider="webgpu",device_id="",configured="webgpu"} 1',
    ]);
  });

  it('has no sample while a fall-back list has not been tried by a model load', async () => {
    configure({ executionProvider: 'webgpu,cpu' });
    expect(samples(await metrics().render(), 'bgone_execution_provider_info')).toEqual([]);
  });
});

describe('default process metrics', () => {
  it.each([
    ['process_cpu_user_seconds_total', 'counter'],
    ['process_resident_memory_bytes', 'gauge'],
    ['process_start_time_seconds', 'gauge'],
    ['nodejs_heap_size_used_bytes', 'gauge'],
    ['nodejs_eventloop_lag_seconds', 'gauge'],
    ['nodejs_gc_duration_seconds', 'histogram'],
    ['nodejs_version_info', 'gauge'],
  ])('include %s (%s), once', async (name, type) => {
    const text = await metrics().render();
    expect(text.split('\n').filter((line) => line === `# TYPE ${name} ${type}`)).toHaveLength(1);
  });

  it('report this process', async () => {
    const text = await metrics().render();
    expect(samples(text, 'nodejs_version_info')[0]).toContain(`version="${process.version}"`);
    const rss = Number(/^process_resident_memory_bytes (\d+)$/m.exec(text)?.[1]);
    expect(rss).toBeGreaterThan(10 * 1024 * 1024);
  });
});

describe('instances', () => {
  it('count apart: requests recorded by one are not in the other', async () => {
    const a = metrics(() => 1, 'uws');
    const b = metrics(() => 2, 'node');
    a.record(REMOVE, 200, 'ok', 1);
    a.recordInference(1);
    b.record('/readyz', 503, 'overloaded', 0.01);
    const [textA, textB] = await Promise.all([a.render(), b.render()]);
    expect(samples(textA, 'bgone_requests_total')).toEqual(['bgone_requests_total{route="/api/v1/remove",status="200",code="ok"} 1']);
    expect(samples(textB, 'bgone_requests_total')).toEqual(['bgone_requests_total{route="/readyz",status="503",code="overloaded"} 1']);
    expect(samples(textA, 'bgone_inference_seconds_count')).toEqual(['bgone_inference_seconds_count 1']);
    expect(samples(textB, 'bgone_inference_seconds_count')).toEqual(['bgone_inference_seconds_count 0']);
    expect(samples(textA, 'bgone_queue_length')).toEqual(['bgone_queue_length 1']);
    expect(samples(textB, 'bgone_queue_length')).toEqual(['bgone_queue_length 2']);
    expect(samples(textB, 'bgone_http_backend_info')).toEqual(['bgone_http_backend_info{backend="node"} 1']);
  });

  it('can be created many times in one process', async () => {
    const many = Array.from({ length: 50 }, () => metrics());
    const last = many.at(-1)!;
    last.record(REMOVE, 200, 'ok', 1);
    expect(samples(await last.render(), 'bgone_requests_total')).toEqual(['bgone_requests_total{route="/api/v1/remove",status="200",code="ok"} 1']);
  });

  it('serve the Prometheus text format 0.0.4', () => {
    expect(metrics().contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
  });
});
