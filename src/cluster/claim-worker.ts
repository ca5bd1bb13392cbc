/**
 * Spreads batch work over the nodes: while this node's batch runner is idle (nothing queued here,
 * nothing running), it claims a queued image held by another live node in the store, takes its
 * bytes from that node, and runs it like its own; the store then records this node as the holder
 * of the result. A claimed image whose bytes cannot be had (its holder died or dropped them) ends
 * failed, uncharged. Synchronous /remove keeps its priority: a node with /remove jobs in its core
 * claims nothing, and claimed images run in the background lane like every batch image.
 */
import type { BatchRunner } from '../batches/batch-runner.js';
import type { Logger } from '../config/logger.js';
import { type PreparedJob, prepareJob } from '../lib/index.js';
import { HTTP_MESSAGES } from '../service/errors.js';
import { jobMemoryEstimate } from '../service/job-memory-gate.js';
import type { ClaimedImage, ClusterStore, Store } from '../store/index.js';
import type { PeerClient } from './peer-client.js';

/** How often an idle node looks for work in the store. */
const POLL_INTERVAL_MS = 250;

export interface ClaimWorkerOptions {
  store: Store;
  cluster: ClusterStore;
  runner: BatchRunner;
  peers: PeerClient;
  logger?: Logger | undefined;
  /** Called after an event was written (the delivery worker polls at once). */
  onEvent?: (() => void) | undefined;
  /** True while this node has synchronous jobs in its core (running or waiting): it takes no other node’s images then. */
  busy?: (() => boolean) | undefined;
}

export class ClaimWorker {
  readonly #options: ClaimWorkerOptions;
  #timer: NodeJS.Timeout | undefined;
  #busy: Promise<void> | undefined;
  #stopped = false;

  constructor(options: ClaimWorkerOptions) {
    this.#options = options;
  }

  start(): void {
    this.#timer = setInterval(() => this.#poll(), POLL_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Stops claiming; a claim in hand is taken over to the runner (or failed) first. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#busy;
  }

  #poll(): void {
    if (this.#busy || this.#stopped || !this.#options.runner.idle || this.#options.busy?.()) return;
    this.#busy = this.#claimOne()
      .catch((err: unknown) => this.#options.logger?.warn({ err }, 'batch: claiming a peer’s image failed'))
      .finally(() => {
        this.#busy = undefined;
      });
  }

  async #claimOne(): Promise<void> {
    const { cluster, peers, runner } = this.#options;
    const claimed = await cluster.claimQueued();
    if (!claimed) return;
    let input: Awaited<ReturnType<PeerClient['takeInput']>>;
    try {
      input = await peers.takeInput(claimed.holder, claimed.imageId);
    } catch (err) {
      this.#options.logger?.warn({ err, image: claimed.imageId }, 'batch: taking a claimed image from its node failed');
      input = undefined;
    }
    if (!input) return this.#lost(claimed);
    // Prepared here, once: the bytes passed their checks on the node that accepted them, so a refusal
    // now means an installation that differs from that node's (a model missing here).
    let job: PreparedJob;
    try {
      job = prepareJob(input.data, input.options, jobMemoryEstimate);
    } catch (err) {
      this.#options.logger?.warn({ err, image: claimed.imageId }, 'batch: a claimed image cannot be prepared on this node');
      return this.#lost(claimed);
    }
    runner.enqueueClaimed({
      imageId: claimed.imageId,
      batchId: claimed.batchId,
      accountId: claimed.accountId,
      filename: claimed.filename,
      requestId: claimed.requestId,
      data: input.data,
      job,
      options: input.options,
    });
  }

  /** Its bytes are gone with their node (or were dropped): it ends failed, uncharged, with its event. */
  async #lost(claimed: ClaimedImage): Promise<void> {
    const base = { batch_id: claimed.batchId, image_id: claimed.imageId, filename: claimed.filename, request_id: claimed.requestId };
    await this.#options.store.batches.finish(claimed.imageId, {
      status: 'failed',
      error: { code: 'internal_server_error', message: HTTP_MESSAGES.internal_server_error! },
      eventData: base,
    });
    this.#options.onEvent?.();
  }
}
