/**
 * This node's heartbeat: a row in `nodes` kept fresh (on the database's clock) every few seconds.
 * A node that stops (kill -9, lost machine) stops beating; once its heartbeat is older than the
 * `lapseMs` it declared in its row (its own setting, so nodes configured differently never
 * misjudge each other), the other nodes count it as dead and release what it held. The tick also
 * runs the store's periodic work (the recovery of dead nodes' holdings, purges).
 */
import type pg from 'pg';
import { DB_NOW_MS } from './context.js';

/** A node beats this often at most, and at least three times per lapse, so one late beat never kills it. */
const MAX_HEARTBEAT_INTERVAL_MS = 5000;

export class NodeHeartbeat {
  #timer: NodeJS.Timeout | undefined;
  #intervalMs = MAX_HEARTBEAT_INTERVAL_MS;
  /** performance.now() of the last successful beat. */
  #lastBeatAt = Number.NEGATIVE_INFINITY;
  /** Where peers reach this node, published with every beat; null until announced. */
  #internalUrl: string | null = null;

  constructor(
    private readonly pool: pg.Pool,
    readonly nodeId: string,
    readonly lapseMs: number,
    /** Run after each beat; its failure is left to the next tick. */
    private readonly onTick: () => Promise<void>,
  ) {}

  /** Registers the node (its first beat) and starts beating. */
  async start(): Promise<void> {
    await this.#beat();
    const interval = Math.max(1, Math.min(MAX_HEARTBEAT_INTERVAL_MS, Math.floor(this.lapseMs / 3)));
    this.#intervalMs = interval;
    this.#timer = setInterval(() => void this.#tick(), interval);
    this.#timer.unref();
  }

  /**
   * Stops beating and deletes the node's row: whatever it still holds is then released by the
   * next recovery of any node, without waiting for the lapse.
   */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    try {
      await this.pool.query('DELETE FROM nodes WHERE id = $1', [this.nodeId]);
    } catch {
      // Database unreachable: the row lapses by itself.
    }
  }

  /**
   * Beats now unless a beat succeeded within the last interval and a half. After an outage or a
   * pause longer than the lapse, the others may count this node as dead and release what it
   * reserves; a reservation made before the next tick's beat could be released under a request
   * still processing it. Beating first makes any reservation that follows belong to a live node.
   */
  async ensureAlive(): Promise<void> {
    if (performance.now() - this.#lastBeatAt > this.#intervalMs * 1.5) await this.#beat();
  }

  /** Publishes where peers reach this node, now and with every beat that follows. */
  async announce(internalUrl: string): Promise<void> {
    this.#internalUrl = internalUrl;
    await this.#beat();
  }

  async #beat(): Promise<void> {
    // An upsert: a node that was paused past its lapse (and reaped) comes back as a live node.
    await this.pool.query(
      `INSERT INTO nodes (id, started_at, heartbeat_at, lapse_ms, internal_url) VALUES ($1, ${DB_NOW_MS}, ${DB_NOW_MS}, $2, $3)
       ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, internal_url = excluded.internal_url`,
      [this.nodeId, this.lapseMs, this.#internalUrl],
    );
    this.#lastBeatAt = performance.now();
  }

  async #tick(): Promise<void> {
    try {
      await this.#beat();
      await this.onTick();
    } catch {
      // Database unreachable or store closing: the next tick tries again.
    }
  }
}
