/**
 * bench:http's batch case: the latency of synchronous POST /api/v1/remove requests, one at a time,
 * first on an idle server, then while a 50-image batch runs on it. Batch work enters the native
 * core only when no synchronous job waits (the library's background lane), so a synchronous
 * request waits behind at most the one batch image already inside: the target is
 * p99 during the batch <= idle p99 + one inference time. The batch is deleted at the end.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { postOnce, type ServiceFixture } from './http-fixture.js';

export interface BatchPhaseResult {
  batchImages: number;
  syncRequests: number;
  idle: { p50: number; p99: number; samples: number[] };
  duringBatch: { p50: number; p99: number; samples: number[] };
  /** One inference (the core's mean in this run), the allowance for the batch image ahead (ms). */
  inferenceMs: number;
  /** idle p99 + one inference. */
  targetP99Ms: number;
  targetMet: boolean;
  /** Batch images that had ended when the synchronous requests were done. */
  batchImagesEnded: number;
}

function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** The multipart body of a batch: `count` copies of the image and the options. */
function batchBody(image: Buffer, count: number, fields: Record<string, string>): { body: Buffer; contentType: string } {
  const boundary = `----bgone-bench-batch-${randomBytes(12).toString('hex')}`;
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields))
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`, 'utf8'));
  for (let i = 0; i < count; i++) {
    parts.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image_file"; filename="b${i}.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`, 'utf8'),
      image,
      Buffer.from('\r\n', 'utf8'),
    );
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`, 'utf8'));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

function call(method: string, url: string, headers: Record<string, string>): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function syncLatencies(fixture: ServiceFixture, body: Buffer, headers: Record<string, string>, count: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const res = await postOnce(fixture.url, body, headers, 600_000);
    if (res.status !== 200) throw new Error(`a synchronous request answered ${res.status}: ${res.body.toString('utf8').slice(0, 300)}`);
    samples.push(res.ms);
  }
  return samples;
}

export async function batchPhase(
  fixture: ServiceFixture,
  image: Buffer,
  syncBody: Buffer,
  syncHeaders: Record<string, string>,
  options: { batchImages: number; syncRequests: number; inferenceMs: number; log: (line: string) => void },
): Promise<BatchPhaseResult> {
  const base = fixture.url.replace(/\/api\/v1\/remove$/, '');
  const auth = { Authorization: syncHeaders.Authorization! };
  options.log(`batch case: ${options.syncRequests} synchronous requests on the idle server`);
  const idle = await syncLatencies(fixture, syncBody, syncHeaders, options.syncRequests);
  const { body, contentType } = batchBody(image, options.batchImages, { format: 'png' });
  const submitted = await postOnce(`${base}/api/v1/batches`, body, { ...auth, 'Content-Type': contentType }, 600_000);
  if (submitted.status !== 202) throw new Error(`the batch answered ${submitted.status}: ${submitted.body.toString('utf8').slice(0, 300)}`);
  const batchId = (JSON.parse(submitted.body.toString('utf8')) as { id: string }).id;
  options.log(`  batch ${batchId} of ${options.batchImages} images accepted; ${options.syncRequests} synchronous requests while it runs`);
  // Let the batch get going: its first image in the core when the first synchronous request comes.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const during = await syncLatencies(fixture, syncBody, syncHeaders, options.syncRequests);
  const state = JSON.parse((await call('GET', `${base}/api/v1/batches/${batchId}`, auth)).body.toString('utf8')) as {
    images: Array<{ status: string }>;
  };
  const ended = state.images.filter((i) => i.status === 'succeeded' || i.status === 'failed').length;
  const removed = await call('DELETE', `${base}/api/v1/batches/${batchId}`, auth);
  if (removed.status !== 204) throw new Error(`deleting the batch answered ${removed.status}`);
  // The allowance for the one batch image a request may wait behind: one inference, as the core's
  // own measurements in this run timed it.
  const idleP99 = percentile(idle, 99);
  const duringP99 = percentile(during, 99);
  const inferenceMs = options.inferenceMs;
  const targetP99Ms = idleP99 + inferenceMs;
  options.log(
    `  idle p99 ${idleP99.toFixed(0)} ms, during the batch p99 ${duringP99.toFixed(0)} ms (target <= ${targetP99Ms.toFixed(0)}); ${ended} batch images ended meanwhile`,
  );
  return {
    batchImages: options.batchImages,
    syncRequests: options.syncRequests,
    idle: { p50: percentile(idle, 50), p99: idleP99, samples: idle },
    duringBatch: { p50: percentile(during, 50), p99: duringP99, samples: during },
    inferenceMs,
    targetP99Ms,
    targetMet: duringP99 <= targetP99Ms,
    batchImagesEnded: ended,
  };
}
