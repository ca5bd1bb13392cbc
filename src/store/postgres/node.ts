/**
 * This node's heartbeat: a row in `nodes` kept fresh (on the database's clock) every few seconds.
 * A node that stops (kill -9, lost machine) stops beating; once its heartbeat is older than the
 * `lapseMs` it declared in its row (its own setting, so nodes configured differently never
 * misjudge each other), the other nodes count it as dead and release what it held. The tick also
 * runs the store's periodic work (the recovery of dead nodes' holdings, purges).
 */
import type pg from 'pg';
import type { PeerNode } from '../store.js';
import { DB_NOW_MS, type Queryable } from './context.js';

/** A node beats this often at most, and at least three times per lapse, so one late beat never kills it. */
const MAX_HEARTBEAT_INTERVAL_MS = 5000;
/** The transaction-level advisory lock under which a node checks its peers' secrets and publishes its own. */
const ANNOUNCE_LOCK_KEY = 0x6267_6f6f; // 'bgoo'

export class NodeHeartbeat {
  #timer: NodeJS.Timeout | undefined;
  #intervalMs = MAX_HEARTBEAT_INTERVAL_MS;
  /** performance.now() of the last successful beat. */
  #lastBeatAt = Number.NEGATIVE_INFINITY;
  /** Where peers reach this node, published with every beat; null until announced. */
  #internalUrl: string | null = null;
  /** The digests of the cluster secrets it accepts (cluster/secret.ts), published with every beat; null until announced. */
  #secretDigests: readonly string[] | null = null;

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

  /**
   * Publishes where peers reach this node and the digests of the secrets it accepts, now and with
   * every beat that follows; unless a live peer sharing batch work accepts none of them: then
   * publishes nothing and returns those peers. The check and the publication hold one lock, so of
   * two nodes announcing at once the second sees the first.
   */
  async announce(internalUrl: string, secretDigests: readonly string[]): Promise<PeerNode[]> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [ANNOUNCE_LOCK_KEY]);
      const refused = await this.secretMismatches(client, secretDigests);
      if (refused.length === 0) await this.#upsert(client, internalUrl, secretDigests);
      await client.query('COMMIT');
      if (refused.length > 0) return refused;
      this.#internalUrl = internalUrl;
      this.#secretDigests = secretDigests;
      this.#lastBeatAt = performance.now();
      return [];
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /**
   * The live nodes sharing batch work (an address published) whose published secret digests
   * include none of `secretDigests`. A node that published none (a build before the digests) is
   * not judged.
   */
  async secretMismatches(q: Queryable, secretDigests: readonly string[]): Promise<PeerNode[]> {
    const { rows } = await q.query<{ id: string; internal_url: string }>(
      `SELECT id, internal_url FROM nodes WHERE heartbeat_at > ${DB_NOW_MS} - lapse_ms AND internal_url IS NOT NULL AND id <> $1
       AND secret_digests IS NOT NULL AND NOT (secret_digests && $2::text[]) ORDER BY id`,
      [this.nodeId, [...secretDigests]],
    );
    return rows.map((r) => ({ nodeId: r.id, url: r.internal_url }));
  }

  async #beat(): Promise<void> {
    await this.#upsert(this.pool, this.#internalUrl, this.#secretDigests);
    this.#lastBeatAt = performance.now();
  }

  async #upsert(q: Queryable, internalUrl: string | null, secretDigests: readonly string[] | null): Promise<void> {
    // An upsert: a node that was paused past its lapse (and reaped) comes back as a live node. A
    // beat sent before announce() but landing after it keeps what announce() published.
    await q.query(
      `INSERT INTO nodes (id, started_at, heartbeat_at, lapse_ms, internal_url, secret_digests) VALUES ($1, ${DB_NOW_MS}, ${DB_NOW_MS}, $2, $3, $4)
       ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,
         internal_url = coalesce(excluded.internal_url, nodes.internal_url), secret_digests = coalesce(excluded.secret_digests, nodes.secret_digests)`,
      [this.nodeId, this.lapseMs, internalUrl, secretDigests === null ? null : [...secretDigests]],
    );
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
