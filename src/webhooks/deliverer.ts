/**
 * The delivery worker: takes due events from the store's outbox (claimed, so that on several nodes
 * each is sent by one node only), POSTs each to its endpoint signed as Standard Webhooks says, and
 * records the outcome: a 2xx within the timeout is delivered; anything else is retried on the
 * contract's schedule (retry-schedule.ts); 410 Gone disables the endpoint. Redirects are not
 * followed (node:http never follows them). The address is resolved and checked at each attempt and
 * the connection goes to exactly that address (webhook-url.ts, src/lib/address-guard.ts).
 *
 * At least once: a node that dies while sending leaves its claim to lapse, and the event is sent
 * again, under the same webhook-id, by whichever node claims it next.
 *
 * Fair to every account: the store hands rows out round-robin across accounts and endpoints, with
 * at most PER_ENDPOINT attempts in flight per endpoint and PER_ACCOUNT per account (on all nodes
 * together), and a free sender takes the next row as soon as it is free, not when its whole batch
 * is done. An endpoint that never answers holds two senders for the attempt's deadline, in which
 * its name's resolution counts too; everyone else's events go out beside it. Delivered and failed
 * rows are pruned after the retention period.
 */
import type http from 'node:http';
import { BATCH_DEFAULTS } from '../config/defaults.js';
import type { Logger } from '../config/logger.js';
import { type CheckedAddress, pinnedRequest } from '../lib/address-guard.js';
import { type ClaimedDelivery, isDatabaseUnavailable, type Store } from '../store/index.js';
import { nextAttemptAt } from './retry-schedule.js';
import { signWebhook } from './signature.js';
import { resolveWebhookAddress } from './webhook-url.js';

export interface DelivererOptions {
  store: Store;
  logger?: Logger | undefined;
  /** Lifts the https-only and private-address rules (BGONE_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** How often the outbox is polled when idle (default 1000 ms). */
  pollIntervalMs?: number | undefined;
  /** A delivery not answered with a 2xx within this, name resolution included, is a failure (default 15 000 ms). */
  timeoutMs?: number | undefined;
  /** Deliveries sent at once by this node (default 32). */
  concurrency?: number | undefined;
  /** Delivered and failed rows are deleted this long after they ended (BGONE_WEBHOOK_RETENTION; default 7 days). */
  retentionMs?: number | undefined;
  /** DNS servers to resolve endpoint names with instead of the system's (tests). */
  dnsServers?: readonly string[] | undefined;
}

/** Attempts in flight at once to one endpoint, and to all of one account's endpoints, on all nodes. */
export const PER_ENDPOINT = 2;
export const PER_ACCOUNT = 4;
export const DEFAULT_RETENTION_MS = BATCH_DEFAULTS.webhookRetentionSeconds * 1000;
/** Pruning runs at most this often, on the store's clock. */
const PRUNE_EVERY_MS = 10 * 60 * 1000;
/** Rows deleted per statement, so that pruning a large backlog never holds the database for long. */
const PRUNE_CHUNK = 1000;

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
  readonly #retentionMs: number;
  readonly #dnsServers: readonly string[] | undefined;
  #timer: NodeJS.Timeout | undefined;
  #filling: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  /** When pruning last ran, on the store's clock. */
  #prunedAt = Number.NEGATIVE_INFINITY;
  /** The attempts in progress (each ends within the timeout), by delivery id. */
  readonly #sending = new Map<string, Promise<void>>();
  readonly #inFlight = new Set<http.ClientRequest>();

  constructor(options: DelivererOptions) {
    this.#store = options.store;
    this.#logger = options.logger;
    this.#allowPrivate = options.allowPrivate;
    this.#pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.#timeoutMs = options.timeoutMs ?? 15_000;
    this.#concurrency = options.concurrency ?? 32;
    this.#retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.#dnsServers = options.dnsServers;
  }

  start(): void {
    if (this.#timer || this.#stopped) return;
    this.#timer = setInterval(() => this.poke(), this.#pollIntervalMs);
    this.#timer.unref();
    this.poke();
  }

  /**
   * Looks at the outbox now (an event was written, or a sender came free); a look in progress
   * looks once more after it.
   */
  poke(): void {
    if (this.#stopped) return;
    if (this.#filling) {
      this.#again = true;
      return;
    }
    this.#filling = this.#fill().finally(() => {
      this.#filling = undefined;
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
    await this.#filling;
    await Promise.all(this.#sending.values());
  }

  /** Gives every free sender a due row, as long as the store has some to give. */
  async #fill(): Promise<void> {
    await this.#pruneWhenDue();
    for (;;) {
      const free = this.#concurrency - this.#sending.size;
      if (this.#stopped || free <= 0) return;
      let claimed: ClaimedDelivery[];
      try {
        claimed = await this.#store.webhooks.claimDue(free, CLAIM_LEASE_MS, { perEndpoint: PER_ENDPOINT, perAccount: PER_ACCOUNT });
      } catch (err) {
        // The outbox keeps every event: the next poll tries again once the database answers.
        if (!isDatabaseUnavailable(err)) this.#logger?.error({ err }, 'webhook outbox: claiming deliveries failed');
        return;
      }
      for (const delivery of claimed) {
        // Claimed again while this node still sends it (its lease lapsed: a clock that jumped, an
        // attempt slower than the lease): the attempt in progress records it, once.
        if (this.#sending.has(delivery.id)) continue;
        const sending = this.#deliver(delivery).finally(() => {
          this.#sending.delete(delivery.id);
          this.poke(); // a sender came free, and an endpoint's place with it
        });
        this.#sending.set(delivery.id, sending);
      }
      if (claimed.length < free) return;
    }
  }

  /** Deletes rows that ended more than the retention period ago, at most every PRUNE_EVERY_MS. */
  async #pruneWhenDue(): Promise<void> {
    const now = this.#store.clock().getTime();
    if (now - this.#prunedAt < PRUNE_EVERY_MS) return;
    this.#prunedAt = now;
    const endedBefore = new Date(now - this.#retentionMs);
    try {
      let pruned = 0;
      for (;;) {
        const n = await this.#store.webhooks.prune(endedBefore, PRUNE_CHUNK);
        pruned += n;
        if (n < PRUNE_CHUNK || this.#stopped) break;
      }
      if (pruned > 0) this.#logger?.info({ pruned, endedBefore: endedBefore.toISOString() }, 'webhook outbox: ended deliveries pruned');
    } catch (err) {
      // Nothing lost: the rows are pruned at a later poll.
      this.#prunedAt = Number.NEGATIVE_INFINITY;
      if (!isDatabaseUnavailable(err)) this.#logger?.error({ err }, 'webhook outbox: pruning failed');
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

  /** One POST; never throws. The deadline runs from before the name is resolved. */
  async #attempt(delivery: ClaimedDelivery): Promise<AttemptResult> {
    const deadline = new AbortController();
    const timeoutError = `no answer within ${this.#timeoutMs / 1000} s`;
    const timer = setTimeout(() => deadline.abort(new Error(timeoutError)), this.#timeoutMs);
    try {
      let target: CheckedAddress;
      try {
        target = await resolveWebhookAddress(delivery.url, this.#allowPrivate, { signal: deadline.signal, dnsServers: this.#dnsServers });
      } catch (err) {
        if (deadline.signal.aborted) return { statusCode: null, error: `${timeoutError} (resolving the name)` };
        return { statusCode: null, error: `refused: ${(err as Error).message}` };
      }
      return await this.#post(delivery, target, deadline.signal, timeoutError);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The POST itself, to the address resolved; ends when the deadline aborts. */
  #post(delivery: ClaimedDelivery, target: CheckedAddress, deadline: AbortSignal, timeoutError: string): Promise<AttemptResult> {
    const url = new URL(delivery.url);
    const timestamp = Math.floor(Date.now() / 1000); // real time: receivers check it against their own clock
    const body = Buffer.from(delivery.body, 'utf8');
    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      const finish = (result: AttemptResult) => {
        if (settled) return;
        settled = true;
        deadline.removeEventListener('abort', onDeadline);
        this.#inFlight.delete(req);
        resolve(result);
      };
      // Connects to the address just checked, whatever the name resolves to by now.
      const req = pinnedRequest(url, target, {
        method: 'POST',
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
      const onDeadline = () => {
        req.destroy();
        finish({ statusCode: null, error: timeoutError });
      };
      if (deadline.aborted) onDeadline();
      else deadline.addEventListener('abort', onDeadline, { once: true });
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
