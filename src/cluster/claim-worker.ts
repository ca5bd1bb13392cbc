/**
 * Spreads batch work over the nodes: while this node's batch runner is idle (nothing queued here,
 * nothing running), it claims a queued image held by another live node in the store, copies its
 * bytes from that node, tells that node to drop its copy, and runs it like its own; the store then
 * records this node as the holder of the result. A hand-off that fails (the holder refuses the
 * secret, answers 5xx, times out, cannot be reached) undoes the claim: the image is queued again,
 * its holder still has the bytes and runs it or another node claims it, and this node waits a
 * moment before it claims again. Only an image whose holder no longer has its bytes (404) ends
 * failed, uncharged; one whose holder died is failed by the store's sweep of dead nodes.
 * Synchronous /remove keeps its priority: a node with /remove jobs in its core claims nothing, and
 * claimed images run in the background lane like every batch image.
 */
import type { BatchRunner } from '../batches/batch-runner.js';
import type { Logger } from '../config/logger.js';
import type { PreparedJob, RemoveBackgroundOptions } from '../lib/index.js';
import { prepareOwnedJob } from '../lib/prepare-job.js';
import { HTTP_MESSAGES } from '../service/errors.js';
import type { ClaimedImage, ClusterStore, Store } from '../store/index.js';
import type { PeerClient } from './peer-client.js';

/** How often an idle node looks for work in the store. */
const POLL_INTERVAL_MS = 250;
/** After a failed hand-off this node claims nothing for this long, doubled on each failure in a row up to the maximum. */
const HANDOFF_BACKOFF_MS = 1000;
const MAX_HANDOFF_BACKOFF_MS = 8000;

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
  /** Failed hand-offs in a row, and the performance.now() before which this node claims nothing. */
  #failures = 0;
  #pausedUntil = 0;

  constructor(options: ClaimWorkerOptions) {
    this.#options = options;
  }

  start(): void {
    this.#timer = setInterval(() => this.#poll(), POLL_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Stops claiming; a claim in hand is taken over to the runner (or undone) first. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#busy;
  }

  #poll(): void {
    if (this.#busy || this.#stopped || !this.#options.runner.idle || this.#options.busy?.()) return;
    if (performance.now() < this.#pausedUntil) return;
    this.#busy = this.#claimOne()
      .catch((err: unknown) => this.#options.logger?.warn({ err }, 'batch: claiming a peer’s image failed'))
      .finally(() => {
        this.#busy = undefined;
      });
  }

  async #claimOne(): Promise<void> {
    const { cluster, peers, runner, logger } = this.#options;
    const claimed = await cluster.claimQueued();
    if (!claimed) return;
    let input: Awaited<ReturnType<PeerClient['copyInput']>>;
    try {
      input = await peers.copyInput(claimed.holder, claimed.imageId);
    } catch (err) {
      logger?.warn({ err, image: claimed.imageId, holder: claimed.holder.nodeId }, 'batch: handing off a claimed image failed; it is queued again');
      return this.#undo(claimed);
    }
    if (!input) return this.#lost(claimed);
    // Prepared here, once: the bytes passed their checks on the node that accepted them, so a refusal
    // now means an installation that differs from that node's (a model missing here): its holder runs it.
    let job: PreparedJob;
    try {
      job = prepareOwnedJob(input.data, input.options);
    } catch (err) {
      logger?.warn({ err, image: claimed.imageId }, 'batch: a claimed image cannot be prepared on this node; it is queued again');
      return this.#undo(claimed);
    }
    this.#failures = 0;
    runner.enqueueClaimed({
      imageId: claimed.imageId,
      batchId: claimed.batchId,
      accountId: claimed.accountId,
      filename: claimed.filename,
      requestId: claimed.requestId,
      data: input.data,
      job,
      options: textOptions(input.options),
    });
    await peers.dropInput(claimed.holder, claimed.imageId);
  }

  /** The claim is given back: the image is queued again for its holder (which has its bytes) or another node. */
  async #undo(claimed: ClaimedImage): Promise<void> {
    this.#failures++;
    this.#pausedUntil = performance.now() + Math.min(MAX_HANDOFF_BACKOFF_MS, HANDOFF_BACKOFF_MS * 2 ** (this.#failures - 1));
    // A failure here leaves the image 'processing' under this live node; nothing else runs it
    // then, so the undo is retried until the store takes it (or this node stops, and its row goes).
    for (let attempt = 0; !this.#stopped || attempt === 0; attempt++) {
      try {
        await this.#options.cluster.unclaim(claimed.imageId);
        return;
      } catch (err) {
        if (attempt === 0) this.#options.logger?.error({ err, image: claimed.imageId }, 'batch: undoing a claim failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, HANDOFF_BACKOFF_MS));
      }
    }
  }

  /** Its bytes are gone from its holder (dropped): it ends failed, uncharged, with its event. */
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

/** The options without the background image's bytes, which the job holds. */
function textOptions(options: RemoveBackgroundOptions): RemoveBackgroundOptions {
  const { bgImageFile: _bytes, ...text } = options;
  return text;
}
