/**
 * Runs the images of accepted batches (and, on several nodes, those it claims from its peers:
 * cluster/claim-worker.ts), one at a time on this node, behind synchronous /remove
 * requests: each job enters the native core in the library's background lane, which lets it in
 * only when no synchronous job waits, so a /remove request never queues behind more than the one
 * batch image already inside. Accounts take turns (round robin), so one account's 50-image batch
 * does not hold another's single image back for the whole run.
 *
 * Images and results live only here, in memory, never on disk: a result is kept for the result TTL
 * (BGONE_BATCH_RESULT_TTL) from the moment its image ends, however long the image waited, so a
 * charged result can always be fetched for that long; or until its batch is deleted. Every state change goes through the store
 * (store.batches.start / finish), which writes the events in the same transaction.
 */
import type { Logger } from '../config/logger.js';
import { BgoneError, type EncodedFormat, type PreparedJob, type RemoveBackgroundOptions, type RemoveBackgroundResult, removeBackground } from '../lib/index.js';
import { HTTP_MESSAGES } from '../service/errors.js';
import { type JobMemoryGate, JobMemoryGateTimeout } from '../service/job-memory-gate.js';
import type { Metrics } from '../service/metrics.js';
import { type BatchImageError, imageEventData, ORPHAN_ERROR, type Store } from '../store/index.js';
import type { BatchMemoryBudget } from './batch-memory-budget.js';

export interface QueuedImage {
  imageId: string;
  batchId: string;
  accountId: number;
  filename: string;
  requestId: string;
  data: Buffer;
  /** Checked on arrival (api/batch-routes.ts), its memory estimate included: run as it is. */
  job: PreparedJob;
  /**
   * The batch's text options as the client gave them (a background URL already downloaded: its
   * bytes are the job's background): what a peer that claims the image prepares it with, given the
   * bytes of the image and of the background.
   */
  options: RemoveBackgroundOptions;
  /** Claimed from another node's queue: already 'processing' in the store, run without start(). */
  claimed?: boolean | undefined;
}

/**
 * The bytes a queued image holds in the batch memory budget: its own, and its batch's background
 * image (one Buffer shared by the batch's images, counted with each: an upper bound).
 */
export function inputBytes(image: Pick<QueuedImage, 'data' | 'job'>): number {
  return image.data.length + (image.job.background?.length ?? 0);
}

export interface HeldResult {
  accountId: number;
  batchId: string;
  data: Buffer;
  format: EncodedFormat;
  width: number;
  height: number;
  requestId: string;
  /** ms since the epoch, on the store's clock. */
  expiresAt: number;
}

export interface BatchRunnerOptions {
  store: Store;
  budget: BatchMemoryBudget;
  /** How long a result is kept from the moment its image ends. */
  resultTtlMs: number;
  /** Admission by estimated memory, shared with /remove (absent: none). */
  memory?: JobMemoryGate | undefined;
  /** The base of result_url (BGONE_PUBLIC_URL, or the address the service listens on). */
  publicUrl: () => string;
  logger?: Logger | undefined;
  metrics?: Metrics | undefined;
  /** Called after an event was written (the delivery worker polls at once). */
  onEvent?: (() => void) | undefined;
  /**
   * Several nodes: where an image this node holds stands in the store, read while a peer's claim
   * on it is being handed off (absent: one node, nobody claims).
   */
  imageState?: ((imageId: string) => Promise<'queued' | 'claimed' | 'ended'>) | undefined;
}

/** How often expired results are dropped from memory. */
const SWEEP_INTERVAL_MS = 30_000;
/**
 * How often this node looks in the store at an image of its own that a peer claimed before it could
 * start it (cluster/claim-worker.ts): its bytes stay here until the peer says it has them, and go
 * back into this node's queue if the peer undoes its claim.
 */
const HANDOFF_CHECK_MS = 500;

export function resultPath(batchId: string, imageId: string): string {
  return `/api/v1/batches/${encodeURIComponent(batchId)}/images/${encodeURIComponent(imageId)}`;
}

/** The contract's error of a failed image, from the library's error. */
function imageError(err: unknown): BatchImageError {
  if (err instanceof BgoneError && err.code !== 'internal_error') return { code: err.code, message: err.message };
  return { code: 'internal_server_error', message: HTTP_MESSAGES.internal_server_error! };
}

export class BatchRunner {
  readonly #options: BatchRunnerOptions;
  /** Queued images per account, and the accounts' turn order. */
  readonly #queues = new Map<number, QueuedImage[]>();
  readonly #results = new Map<string, HeldResult>();
  /** The bytes of the queued images held here, by image id, until they start here or a peer takes them. */
  readonly #inputs = new Map<string, QueuedImage>();
  #working: Promise<void> | undefined;
  #closed = false;
  readonly #sweeper: NodeJS.Timeout;

  constructor(options: BatchRunnerOptions) {
    this.#options = options;
    this.#sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.#sweeper.unref();
  }

  /** Images waiting on this node. */
  get queued(): number {
    let n = 0;
    for (const q of this.#queues.values()) n += q.length;
    return n;
  }

  /** Nothing queued here, nothing running: the node may take a queued image of another node. */
  get idle(): boolean {
    return !this.#closed && !this.#working && this.queued === 0;
  }

  /** Queues accepted images (their bytes already taken from the budget by the caller). */
  enqueue(images: QueuedImage[]): void {
    for (const image of images) {
      if (!image.claimed) this.#inputs.set(image.imageId, image);
      const queue = this.#queues.get(image.accountId) ?? [];
      queue.push(image);
      this.#queues.set(image.accountId, queue);
    }
    this.#kick();
  }

  /** Runs an image claimed from another node (its bytes pulled from there), accounted here from now on. */
  enqueueClaimed(image: QueuedImage): void {
    this.#options.budget.take(image.accountId, inputBytes(image));
    this.enqueue([{ ...image, claimed: true }]);
  }

  /** The bytes of an image queued here, for the peer that claimed it (a copy: they stay here). */
  input(imageId: string): QueuedImage | undefined {
    return this.#inputs.get(imageId);
  }

  /**
   * The peer that claimed a queued image has its bytes: they leave this node's queue and its
   * budget. False when this node does not hold them (any more).
   */
  dropHandedOff(imageId: string): boolean {
    const image = this.#inputs.get(imageId);
    if (!image) return false;
    this.#inputs.delete(imageId);
    const queue = this.#queues.get(image.accountId);
    if (queue) {
      const kept = queue.filter((queued) => queued.imageId !== imageId);
      if (kept.length === 0) this.#queues.delete(image.accountId);
      else this.#queues.set(image.accountId, kept);
    }
    this.#options.budget.give(image.accountId, inputBytes(image));
    return true;
  }

  /** A result held on this node, if it is there and not expired. */
  result(imageId: string): HeldResult | undefined {
    const held = this.#results.get(imageId);
    if (held && held.expiresAt <= this.#options.store.clock().getTime()) {
      this.#drop(imageId);
      return undefined;
    }
    return held;
  }

  /** Forgets a batch: its queued images and its results (DELETE; the store has cancelled them). */
  forget(batchId: string): void {
    for (const [accountId, queue] of this.#queues) {
      const kept = queue.filter((image) => {
        if (image.batchId !== batchId) return true;
        this.#inputs.delete(image.imageId);
        this.#options.budget.give(image.accountId, inputBytes(image));
        return false;
      });
      if (kept.length === 0) this.#queues.delete(accountId);
      else this.#queues.set(accountId, kept);
    }
    for (const [imageId, held] of this.#results) if (held.batchId === batchId) this.#drop(imageId);
    for (const [imageId, image] of this.#inputs) if (image.batchId === batchId) this.#dropInput(imageId);
  }

  /** Drops results past their expiry. */
  sweep(): void {
    const now = this.#options.store.clock().getTime();
    for (const [imageId, held] of this.#results) if (held.expiresAt <= now) this.#drop(imageId);
  }

  /**
   * Stops: the image in progress ends; images still queued are failed (the service restarted, not
   * charged, their events written), and every result is dropped.
   */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    await this.#working;
    for (const queue of this.#queues.values())
      for (const image of queue) {
        // One a peer claimed and is taking over is its to run (or, if the hand-off fails now, the
        // sweep's to fail once this node's row is gone).
        if (await this.#claimedElsewhere(image.imageId)) continue;
        await this.#finish(image, { status: 'failed', error: ORPHAN_ERROR }, undefined);
      }
    this.#queues.clear();
    for (const imageId of [...this.#inputs.keys()]) this.#dropInput(imageId);
    for (const imageId of [...this.#results.keys()]) this.#drop(imageId);
  }

  /**
   * An image of this node that a peer claimed: looked up in the store until its bytes are gone from
   * here (the peer took them, its batch was deleted), then dropped once it ended elsewhere, or put
   * back in this node's queue once the claim was undone (the peer could not get the bytes).
   */
  #watchHandOff(image: QueuedImage): void {
    const imageState = this.#options.imageState;
    if (!imageState) {
      this.#dropInput(image.imageId); // one node: nobody claims, so it was cancelled or failed
      return;
    }
    const check = async () => {
      if (this.#closed || !this.#inputs.has(image.imageId)) return;
      let state: 'queued' | 'claimed' | 'ended';
      try {
        state = await imageState(image.imageId);
      } catch {
        state = 'claimed'; // the store did not answer: look again later
      }
      if (this.#closed || !this.#inputs.has(image.imageId)) return;
      if (state === 'ended') this.#dropInput(image.imageId);
      else if (state === 'queued') this.enqueue([image]);
      else setTimeout(() => void check(), HANDOFF_CHECK_MS).unref();
    };
    setTimeout(() => void check(), HANDOFF_CHECK_MS).unref();
  }

  async #claimedElsewhere(imageId: string): Promise<boolean> {
    try {
      return (await this.#options.imageState?.(imageId)) === 'claimed';
    } catch {
      return false;
    }
  }

  /** Drops the bytes of an image that no longer waits here (taken by a peer, cancelled). */
  #dropInput(imageId: string): void {
    const image = this.#inputs.get(imageId);
    if (!image) return;
    this.#inputs.delete(imageId);
    this.#options.budget.give(image.accountId, inputBytes(image));
  }

  #drop(imageId: string): void {
    const held = this.#results.get(imageId);
    if (!held) return;
    this.#results.delete(imageId);
    this.#options.budget.give(held.accountId, held.data.length);
  }

  /** The next image, accounts taking turns: the first account's queue goes to the back after one image. */
  #next(): QueuedImage | undefined {
    for (const [accountId, queue] of this.#queues) {
      const image = queue.shift();
      this.#queues.delete(accountId);
      if (queue.length > 0) this.#queues.set(accountId, queue); // re-inserted: now last in turn
      if (image) return image;
    }
    return undefined;
  }

  #kick(): void {
    if (this.#working || this.#closed) return;
    this.#working = this.#work().finally(() => {
      this.#working = undefined;
      if (!this.#closed && this.queued > 0) this.#kick();
    });
  }

  async #work(): Promise<void> {
    for (let image = this.#next(); image && !this.#closed; image = this.#next()) await this.#run(image);
  }

  async #run(image: QueuedImage): Promise<void> {
    const { store, logger } = this.#options;
    let started: boolean;
    try {
      started = image.claimed === true || (await store.batches.start(image.imageId));
    } catch (err) {
      logger?.error({ err, image: image.imageId }, 'batch: starting an image failed');
      started = false;
      await this.#finish(image, { status: 'failed', error: imageError(err) }, undefined);
      return;
    }
    if (!started) {
      // Cancelled (DELETE), already failed, or claimed by a peer: its bytes stay until the peer has
      // them, and come back into the queue if the peer's claim is undone.
      if (this.#inputs.has(image.imageId)) this.#watchHandOff(image);
      return;
    }
    this.#inputs.delete(image.imageId);
    let result: RemoveBackgroundResult | undefined;
    let error: BatchImageError | undefined;
    let releaseMemory = () => {};
    try {
      releaseMemory = await this.#memoryFor(image);
      result = await removeBackground(image.job, { priority: 'background' });
      this.#options.metrics?.recordInference(result.timings.inference / 1000);
    } catch (err) {
      if (!(err instanceof BgoneError) || err.code === 'internal_error')
        logger?.error({ requestId: image.requestId, code: (err as BgoneError).code, detail: (err as BgoneError).detail }, 'batch: processing failed');
      error = imageError(err);
    }
    releaseMemory();
    await this.#finish(image, result ? { status: 'succeeded' } : { status: 'failed', error: error! }, result);
  }

  /**
   * Waits for the image's estimated memory in the gate /remove uses. Batch work is never refused for
   * memory: it waits its turn again after a timeout (the image stays queued on this node meanwhile).
   */
  async #memoryFor(image: QueuedImage): Promise<() => void> {
    const gate = this.#options.memory;
    if (!gate) return () => {};
    for (;;) {
      try {
        return await gate.acquire(image.job.memoryBytes);
      } catch (err) {
        if (!(err instanceof JobMemoryGateTimeout) || this.#closed) throw err;
      }
    }
  }

  /**
   * Records how an image ended and keeps a success's bytes. store.batches.finish charges or
   * releases its credit and writes its events (image.processed, and batch.completed after the
   * batch's last image) in one transaction; their data is built by store/webhook-events.ts.
   */
  async #finish(
    image: QueuedImage,
    outcome: { status: 'succeeded' } | { status: 'failed'; error: BatchImageError },
    result: RemoveBackgroundResult | undefined,
  ): Promise<void> {
    const { store, logger, budget } = this.#options;
    this.#inputs.delete(image.imageId);
    budget.give(image.accountId, inputBytes(image));
    try {
      if (outcome.status === 'succeeded' && result) {
        // Kept for the TTL from now, when it ends (the store's finished_at, a moment later, gives
        // the same expiry to the views): never from the submission, which a long queue may have
        // put in the past already.
        const expiresAt = new Date(store.clock().getTime() + this.#options.resultTtlMs);
        // Held before the store says it succeeded, so that a GET right after the event finds it.
        budget.take(image.accountId, result.data.length);
        this.#results.set(image.imageId, {
          accountId: image.accountId,
          batchId: image.batchId,
          data: result.data,
          format: result.format,
          width: result.width,
          height: result.height,
          requestId: image.requestId,
          expiresAt: expiresAt.getTime(),
        });
        const held = this.#results.get(image.imageId)!;
        const after = await store.batches.finish(image.imageId, {
          status: 'succeeded',
          width: result.width,
          height: result.height,
          format: result.format,
          eventData: imageEventData(image, {
            width: result.width,
            height: result.height,
            format: result.format,
            resultUrl: `${this.#options.publicUrl()}${resultPath(image.batchId, image.imageId)}`,
            expiresAt,
          }),
        });
        if (!after)
          this.#drop(image.imageId); // deleted meanwhile: not charged, nothing kept
        // The views count the TTL from the store's finished_at, written a moment after the event's
        // expires_at was computed: the bytes stay until the later of the two.
        else held.expiresAt = store.clock().getTime() + this.#options.resultTtlMs;
      } else {
        const error = outcome.status === 'failed' ? outcome.error : ORPHAN_ERROR;
        await store.batches.finish(image.imageId, { status: 'failed', error, eventData: imageEventData(image) });
      }
      this.#options.onEvent?.();
    } catch (err) {
      // The store could not record it: the image stays unended there, and the orphan sweep of the
      // next start (or of another node) fails it and releases its credit. Nothing is kept here.
      this.#drop(image.imageId);
      logger?.error({ err, image: image.imageId }, 'batch: recording the outcome of an image failed');
    }
  }
}
