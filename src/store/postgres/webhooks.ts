/**
 * Webhook endpoints and the delivery outbox on PostgreSQL, shared by every node.
 *
 * Events are written by enqueue() inside the transaction of the change they report (batches.ts),
 * so a node that dies after committing leaves its events in the outbox for the others to send.
 * Any node sends any row: claimDue() picks due rows fairly (batch-rules.ts FAIR_DUE_SQL) and stamps
 * a lease in the same statement, one node at a time (an advisory lock), so two nodes polling at
 * once never get the same row nor pass the per-endpoint caps together, and a node that dies
 * mid-attempt leaves a claim that lapses and makes the row due again (at least once; receivers
 * dedupe on the id).
 */

import { DELIVERY_COLUMNS, type DeliveryRow, ENDPOINT_COLUMNS, type EndpointRow, qualified, toDelivery, toEndpoint } from '../batch-rows.js';
import {
  afterAttempt,
  checkClaimCaps,
  checkEndpointInput,
  checkPositiveInteger,
  clipError,
  ENDPOINT_DISABLED_ERROR,
  FAIR_DUE_SQL,
  generateWebhookSecret,
  NO_CLAIM_CAPS,
  newId,
} from '../batch-rules.js';
import { StoreError } from '../errors.js';
import { checkId } from '../rules.js';
import type {
  ClaimCaps,
  ClaimedDelivery,
  CreatedWebhookEndpoint,
  DeliveryOutcome,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEventType,
  WebhookStore,
} from '../store.js';
import { eventBody, webhookTestData } from '../webhook-events.js';
import type { PostgresContext, Queryable } from './context.js';

const D_COLUMNS = qualified('d', DELIVERY_COLUMNS);

/** The fair pick of claimDue with PostgreSQL's numbered parameters. */
const FAIR_DUE_PG = FAIR_DUE_SQL.replaceAll('@now', '$1').replaceAll('@perEndpoint', '$2').replaceAll('@perAccount', '$3').replaceAll('@limit', '$4');
/** The advisory lock that makes claims take turns across nodes. */
const CLAIM_LOCK = 'bgone:webhook-claims';

export class PostgresWebhooks implements WebhookStore {
  constructor(private readonly ctx: PostgresContext) {}

  create(accountId: number, input: { url: string; description: string; maxEndpoints: number }): Promise<CreatedWebhookEndpoint | null> {
    checkEndpointInput(input);
    // The account row locked: creates of one account queue there, so the count cannot be passed.
    return this.ctx.transaction(async (c) => {
      if (!(await this.ctx.lockAccount(c, accountId))) throw new StoreError('not_found', `no account ${accountId}`);
      const { rows: count } = await c.query<{ n: number }>('SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = $1', [accountId]);
      if (count[0]!.n >= input.maxEndpoints) return null;
      const secret = generateWebhookSecret();
      const { rows } = await c.query<EndpointRow>(
        `INSERT INTO webhook_endpoints (id, account_id, url, description, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6)
         RETURNING ${ENDPOINT_COLUMNS}`,
        [newId('wh_'), accountId, input.url, input.description, secret, this.ctx.now()],
      );
      return { endpoint: toEndpoint(rows[0]!), secret };
    });
  }

  async list(accountId: number): Promise<WebhookEndpoint[]> {
    const { rows } = await this.ctx.pool.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = $1 ORDER BY seq`, [
      accountId,
    ]);
    return rows.map(toEndpoint);
  }

  async get(accountId: number, endpointId: string): Promise<WebhookEndpoint | null> {
    const { rows } = await this.ctx.pool.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = $1 AND id = $2`, [
      accountId,
      endpointId,
    ]);
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  delete(accountId: number, endpointId: string): Promise<boolean> {
    return this.ctx.transaction(async (c) => {
      // Locked first: an event being written for it (enqueue's KEY SHARE) commits before its rows go.
      const { rows } = await c.query('SELECT 1 FROM webhook_endpoints WHERE account_id = $1 AND id = $2 FOR UPDATE', [accountId, endpointId]);
      if (rows.length === 0) return false;
      await c.query('DELETE FROM webhook_deliveries WHERE endpoint_id = $1', [endpointId]);
      await c.query('DELETE FROM webhook_endpoints WHERE id = $1', [endpointId]);
      return true;
    });
  }

  async sendTest(accountId: number, endpointId: string): Promise<boolean> {
    const now = this.ctx.now();
    const body = eventBody('webhook.test', now, webhookTestData(endpointId));
    // One statement: the row is written only if the account has that endpoint.
    const { rowCount } = await this.ctx.pool.query(
      `INSERT INTO webhook_deliveries (id, endpoint_id, account_id, type, body, created_at, status, next_attempt_at)
       SELECT $1, id, account_id, 'webhook.test', $4, $5, 'pending', $5 FROM webhook_endpoints WHERE account_id = $2 AND id = $3`,
      [newId('msg_'), accountId, endpointId, body, now],
    );
    return (rowCount ?? 0) > 0;
  }

  /**
   * Writes one event for each of the account's enabled endpoints, due now, in the caller's
   * transaction. The endpoints are held with KEY SHARE (what a foreign key check takes): a
   * concurrent delete waits for this transaction instead of failing it. Returns how many rows.
   */
  async enqueue(c: Queryable, accountId: number, type: WebhookEventType, data: Record<string, unknown>, nowMs: number): Promise<number> {
    const { rows: endpoints } = await c.query<{ id: string }>(
      'SELECT id FROM webhook_endpoints WHERE account_id = $1 AND disabled_at IS NULL ORDER BY seq FOR KEY SHARE',
      [accountId],
    );
    if (endpoints.length === 0) return 0;
    await c.query(
      `INSERT INTO webhook_deliveries (id, endpoint_id, account_id, type, body, created_at, status, next_attempt_at)
       SELECT m.id, m.endpoint_id, $3, $4, $5, $6, 'pending', $6 FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS m (id, endpoint_id, n)
       ORDER BY m.n`,
      [endpoints.map(() => newId('msg_')), endpoints.map((e) => e.id), accountId, type, eventBody(type, nowMs, data), nowMs],
    );
    return endpoints.length;
  }

  async claimDue(limit: number, leaseMs: number, caps: ClaimCaps = NO_CLAIM_CAPS): Promise<ClaimedDelivery[]> {
    checkPositiveInteger('limit', limit);
    checkPositiveInteger('leaseMs', leaseMs);
    checkClaimCaps(caps);
    return this.ctx.transaction(async (c) => {
      // Claims are counted against the caps across nodes: one claim at a time, everywhere (a few
      // milliseconds each), so two nodes cannot both see an endpoint's last free place.
      await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [CLAIM_LOCK]);
      const now = this.ctx.now();
      // The re-checks of status and claimed_until see a row recordAttempt or retry changed since
      // the CTE's snapshot (READ COMMITTED re-reads an updated row): such a row is left alone.
      const { rows } = await c.query<DeliveryRow & { url: string; secret: string; seq: number; account_slot: number; endpoint_slot: number }>(
        `${FAIR_DUE_PG}
         UPDATE webhook_deliveries d SET claimed_until = $5 FROM picked p, webhook_endpoints e
         WHERE d.seq = p.seq AND e.id = d.endpoint_id AND d.status = 'pending' AND (d.claimed_until IS NULL OR d.claimed_until <= $1)
         RETURNING ${D_COLUMNS}, e.url, e.secret, d.seq, p.account_slot, p.endpoint_slot`,
        [now, caps.perEndpoint, caps.perAccount, limit, now + leaseMs],
      );
      // UPDATE ... RETURNING has no order of its own: the order they were picked in.
      return rows
        .sort((a, b) => a.account_slot - b.account_slot || a.endpoint_slot - b.endpoint_slot || a.next_attempt_at! - b.next_attempt_at! || a.seq - b.seq)
        .map(({ url, secret, seq: _seq, account_slot: _a, endpoint_slot: _e, ...row }) => ({ ...toDelivery(row), url, secret }));
    });
  }

  async prune(endedBefore: Date, limit: number): Promise<number> {
    const { rowCount } = await this.ctx.pool.query(
      `DELETE FROM webhook_deliveries WHERE seq IN (
         SELECT seq FROM webhook_deliveries WHERE status <> 'pending' AND ended_at < $1 ORDER BY ended_at LIMIT $2)`,
      [endedBefore.getTime(), checkPositiveInteger('limit', limit)],
    );
    return rowCount ?? 0;
  }

  recordAttempt(deliveryId: string, outcome: DeliveryOutcome): Promise<void> {
    return this.ctx.transaction(async (c) => {
      const { rows } = await c.query<{
        endpoint_id: string;
        status: string;
        delivered_at: number | null;
        next_attempt_at: number | null;
        ended_at: number | null;
      }>('SELECT endpoint_id, status, delivered_at, next_attempt_at, ended_at FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [deliveryId]);
      const before = rows[0];
      if (!before) return; // its endpoint was deleted meanwhile: nothing left to record
      const now = this.ctx.now();
      const next = afterAttempt(before, outcome, now);
      if (outcome.disableEndpoint) {
        await c.query('UPDATE webhook_endpoints SET disabled_at = coalesce(disabled_at, $2) WHERE id = $1', [before.endpoint_id, now]);
        await c.query(
          `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, claimed_until = NULL, ended_at = $4, last_error = $2
           WHERE endpoint_id = $1 AND status = 'pending' AND id <> $3`,
          [before.endpoint_id, ENDPOINT_DISABLED_ERROR, deliveryId, now],
        );
      }
      await c.query(
        `UPDATE webhook_deliveries SET attempts = attempts + 1, status = $2, next_attempt_at = $3, delivered_at = $4, ended_at = $7,
           last_status_code = $5, last_error = $6, claimed_until = NULL
         WHERE id = $1`,
        [deliveryId, next.status, next.nextAttemptAt, next.deliveredAt, outcome.statusCode, clipError(outcome.error), next.endedAt],
      );
    });
  }

  async deliveries(accountId: number, endpointId: string, limit: number): Promise<WebhookDelivery[]> {
    const { rows } = await this.ctx.pool.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE account_id = $1 AND endpoint_id = $2 ORDER BY seq DESC LIMIT $3`,
      [accountId, endpointId, checkPositiveInteger('limit', limit)],
    );
    return rows.map(toDelivery);
  }

  async recentDeliveries(accountId: number | undefined, limit: number): Promise<WebhookDelivery[]> {
    const { rows } = await this.ctx.pool.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE $1::bigint IS NULL OR account_id = $1 ORDER BY seq DESC LIMIT $2`,
      [accountId ?? null, checkPositiveInteger('limit', limit)],
    );
    return rows.map(toDelivery);
  }

  async retry(deliveryId: string): Promise<boolean> {
    checkId('deliveryId', deliveryId, true);
    const { rowCount } = await this.ctx.pool.query(
      `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2, claimed_until = NULL, ended_at = NULL
       WHERE id = $1 AND status IN ('pending', 'failed')`,
      [deliveryId, this.ctx.now()],
    );
    return (rowCount ?? 0) > 0;
  }
}
