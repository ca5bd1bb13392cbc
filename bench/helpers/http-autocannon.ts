/**
 * A typed wrapper around autocannon (CommonJS, no bundled types) for bench/http.ts: one bounded run
 * (a fixed number of requests, not a duration) against a loopback URL.
 *
 * autocannon's own `duration` is only updated on its sample tick, so it can overshoot the real run
 * by up to one sample interval; with runs of a few seconds that matters. The wrapper therefore keeps
 * its own wall clock (from the call to the last response) and the exact list of response times,
 * next to autocannon's aggregated result.
 */
import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The autocannon options this benchmark uses (a subset of what autocannon accepts). */
export interface AutocannonOptions {
  url: string;
  method: 'POST' | 'GET';
  connections: number;
  /** Total number of requests over all connections; the run stops after that many responses. */
  amount: number;
  /** Seconds without a response after which a request counts as a timeout. */
  timeout: number;
  body?: Buffer;
  headers?: Record<string, string>;
  pipelining?: number;
  /** Milliseconds between autocannon's throughput samples. */
  sampleInt?: number;
}

/** One of autocannon's histogram summaries (latency in ms, requests and bytes per sample). */
export interface AutocannonHistogram {
  average: number;
  mean: number;
  stddev: number;
  min: number;
  max: number;
  total?: number;
  p50: number;
  p90: number;
  p97_5: number;
  p99: number;
  [key: string]: number | undefined;
}

export interface AutocannonResult {
  duration: number;
  start: Date;
  finish: Date;
  errors: number;
  timeouts: number;
  mismatches: number;
  non2xx: number;
  resets: number;
  '1xx': number;
  '2xx': number;
  '3xx': number;
  '4xx': number;
  '5xx': number;
  statusCodeStats: Record<string, { count: number }>;
  latency: AutocannonHistogram & { totalCount: number };
  requests: AutocannonHistogram & { sent: number };
  throughput: AutocannonHistogram;
}

interface AutocannonInstance extends EventEmitter {
  stop(): void;
}

type AutocannonFn = (options: AutocannonOptions, callback: (err: Error | null, result: AutocannonResult) => void) => AutocannonInstance;

const autocannon = require('autocannon') as AutocannonFn;

export const AUTOCANNON_VERSION: string = (require('autocannon/package.json') as { version: string }).version;

export interface BoundedRun {
  /** autocannon's aggregated result, as it reports it. */
  result: AutocannonResult;
  /** From the call to the last response (ms), measured here. */
  wallMs: number;
  /** Response times of the 2xx answers (ms), in completion order. */
  latenciesMs: number[];
  /** Status code of every answer, in completion order. */
  statuses: number[];
  /** Errors reported per request (connection errors, timeouts), by message. */
  requestErrors: Record<string, number>;
}

/** Runs autocannon to completion; `hardLimitMs` stops it if it has not finished by then. */
export function runBounded(options: AutocannonOptions, hardLimitMs: number): Promise<BoundedRun> {
  return new Promise((resolve, reject) => {
    const latenciesMs: number[] = [];
    const statuses: number[] = [];
    const requestErrors: Record<string, number> = {};
    const start = performance.now();
    let lastResponse = start;
    let stoppedByLimit = false;
    let limit: NodeJS.Timeout | undefined;
    const instance = autocannon(options, (err, result) => {
      clearTimeout(limit);
      if (err) return reject(err);
      if (stoppedByLimit) return reject(new Error(`autocannon run did not finish within ${hardLimitMs} ms (${statuses.length} of ${options.amount} answers)`));
      resolve({ result, wallMs: lastResponse - start, latenciesMs, statuses, requestErrors });
    });
    limit = setTimeout(() => {
      stoppedByLimit = true;
      instance.stop();
    }, hardLimitMs);
    instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
      lastResponse = performance.now();
      statuses.push(statusCode);
      if (statusCode >= 200 && statusCode < 300) latenciesMs.push(responseTime);
    });
    instance.on('reqError', (error: Error) => {
      requestErrors[error.message] = (requestErrors[error.message] ?? 0) + 1;
    });
  });
}
