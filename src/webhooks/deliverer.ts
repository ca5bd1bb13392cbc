/**
 * The delivery worker: takes due events from the store's outbox (claimed, so that on several nodes
 * each is sent by one node only), POSTs each to its endpoint signed as Standard Webhooks says, and
 * records the outcome: a 2xx within the timeout is delivered; anything else is retried on the
 * contract's schedule (retry-schedule.ts); 410 Gone disables the endpoint. Redirects are not
 * followed (node:http never follows them). The address is resolved and checked at each attempt and
 * the connection goes to exactly that address (address-guard.ts).
 *
 * At least once: a node that dies while sending leaves its claim to lapse, and the event is sent
 * again, under the same webhook-id, by whichever node claims it next.
 */
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Logger } from '../config/logger.js';
import { type ClaimedDelivery, isDatabaseUnavailable, type Store } from '../store/index.js';
import { resolveWebhookAddress } from './address-guard.js';
import { nextAttemptAt } from './retry-schedule.js';
import { signWebhook } from './signature.js';

export interface DelivererOptions {
  store: Store;
  logger?: Logger | undefined;
  /** Lifts the https-only and private-address rules (BGONE_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** How often the outbox is polled when idle (default 1000 ms). */
  pollIntervalMs?: number | undefined;
  /** A delivery not answered with a 2xx within this is a failure (default 15 000 ms). */
  timeoutMs?: number | undefined;
  /** Deliveries sent at once (default 8). */
  concurrency?: number | undefined;
}

/** How long a claim keeps other workers off a row: longer than any attempt can take. */
const CLAIM_LEASE_MS = 60_000;
/** Bytes of a receiver's answer that are read (and thrown away) at most. */
const MAX_ANSWER_BYTES = 64 * 1024;

interface AttemptResult {
  statusCode: number | null;
  error: string | null;
}

export class WebhookDeliverer {
  readonly #store: Store;
  readonly #logger: Logger | undefined;
  readonly #allowPrivate: boolean;
  readonly #pollIntervalMs: number;
  readonly #timeoutMs: number;
  readonly #concurrency: number;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  readonly #inFlight = new Set<http.ClientRequest>();

  constructor(options: DelivererOptions) {
    this.#store = options.store;
    this.#logger = options.logger;
    this.#allowPrivate = options.allowPrivate;
    this.#pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.#timeoutMs = options.timeoutMs ?? 15_000;
    this.#concurrency = options.concurrency ?? 8;
  }

  start(): void {
    if (this.#timer || this.#stopped) return;
    this.#timer = setInterval(() => this.poke(), this.#pollIntervalMs);
    this.#timer.unref();
    this.poke();
  }

  /** Polls the outbox now (e.g. right after an event was written); a poll in progress polls once more after it. */
  poke(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#drain().finally(() => {
      this.#running = undefined;
      if (this.#again) {
        this.#again = false;
        this.poke();
      }
    });
  }

  /** Stops polling and lets the deliveries in progress end (each is bounded by the timeout). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#running;
  }

  /** Sends due deliveries, batch after batch, until none is due. */
  async #drain(): Promise<void> {
    for (;;) {
      if (this.#stopped) return;
      let claimed: ClaimedDelivery[];
      try {
        claimed = await this.#store.webhooks.claimDue(this.#concurrency, CLAIM_LEASE_MS);
      } catch (err) {
        // The outbox keeps every event: the next poll tries again once the database answers.
        if (!isDatabaseUnavailable(err)) this.#logger?.error({ err }, 'webhook outbox: claiming deliveries failed');
        return;
      }
      if (claimed.length === 0) return;
      await Promise.all(claimed.map((delivery) => this.#deliver(delivery)));
      if (claimed.length < this.#concurrency) return;
    }
  }

  async #deliver(delivery: ClaimedDelivery): Promise<void> {
    const result = await this.#attempt(delivery);
    const delivered = result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300;
    const gone = result.statusCode === 410;
    const attempts = delivery.attempts + 1;
    const next = delivered || gone ? null : nextAttemptAt(attempts, this.#store.clock());
    try {
      await this.#store.webhooks.recordAttempt(delivery.id, {
        delivered,
        statusCode: result.statusCode,
        error: delivered ? null : (result.error ?? `HTTP ${result.statusCode}`),
        nextAttemptAt: next,
        disableEndpoint: gone,
      });
    } catch (err) {
      // Not recorded: the claim lapses and the event is sent again (receivers dedupe on webhook-id).
      this.#logger?.error({ err, delivery: delivery.id }, 'webhook outbox: recording an attempt failed');
    }
    const log = { delivery: delivery.id, endpoint: delivery.endpointId, type: delivery.type, attempts, status: result.statusCode };
    if (delivered) this.#logger?.info(log, 'webhook delivered');
    else this.#logger?.warn({ ...log, error: result.error, next: next?.toISOString() ?? null, disabled: gone }, 'webhook delivery failed');
  }

  /** One POST; never throws. */
  async #attempt(delivery: ClaimedDelivery): Promise<AttemptResult> {
    let target: { address: string; family: 4 | 6 };
    try {
      target = await resolveWebhookAddress(delivery.url, this.#allowPrivate);
    } catch (err) {
      return { statusCode: null, error: `refused: ${(err as Error).message}` };
    }
    const url = new URL(delivery.url);
    const timestamp = Math.floor(Date.now() / 1000); // real time: receivers check it against their own clock
    const body = Buffer.from(delivery.body, 'utf8');
    // Connect to the address just checked, whatever the name resolves to by now.
    const pinned: LookupFunction = (_host, options, callback) => {
      if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [target]);
      else callback(null, target.address, target.family);
    };
    const request = url.protocol === 'https:' ? https.request : http.request;
    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      const finish = (result: AttemptResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.#inFlight.delete(req);
        resolve(result);
      };
      const req = request(url, {
        method: 'POST',
        lookup: pinned,
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': String(body.length),
          'user-agent': 'bgone-webhooks',
          'webhook-id': delivery.id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(delivery.secret, delivery.id, timestamp, delivery.body),
        },
      });
      this.#inFlight.add(req);
      const timer = setTimeout(() => {
        req.destroy();
        finish({ statusCode: null, error: `no answer within ${this.#timeoutMs / 1000} s` });
      }, this.#timeoutMs);
      req.on('response', (res) => {
        // The status decides; the answer's body is read (bounded) only so the socket ends cleanly.
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_ANSWER_BYTES) res.destroy();
        });
        res.on('error', () => {});
        res.on('close', () => finish({ statusCode: res.statusCode ?? null, error: null }));
      });
      req.on('error', (err) => finish({ statusCode: null, error: err.message }));
      req.end(body);
    });
  }
}
