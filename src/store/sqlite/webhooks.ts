/**
 * Webhook endpoints and the delivery outbox on SQLite.
 *
 * An event is a row per enabled endpoint, written by enqueue() inside the transaction of the change
 * it reports (batches.ts), so a committed change always has its events and a rolled-back one has
 * none; a restart loses none of them. Senders claim due rows for a lease (claimDue): one process
 * per file, but several workers in it must not send a row twice, and a sender that dies mid-attempt
 * leaves a claim that lapses and makes the row due again (at least once; receivers dedupe on the id).
 * Rows are picked fairly, not first in first out (batch-rules.ts FAIR_DUE_SQL); rows that ended
 * are pruned after the retention period (prune).
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
import type { Clock } from '../clock.js';
import { checkId } from '../rules.js';
import type { ClaimCaps, ClaimedDelivery, CreatedWebhookEndpoint, DeliveryOutcome, WebhookDelivery, WebhookEndpoint, WebhookEventType } from '../store.js';
import { eventBody, webhookTestData } from '../webhook-events.js';
import type { Accounts } from './accounts.js';
import type { Db } from './database.js';

const D_COLUMNS = qualified('d', DELIVERY_COLUMNS);

export class Webhooks {
  private readonly countStmt;
  private readonly insertEndpointStmt;
  private readonly listStmt;
  private readonly getStmt;
  private readonly enabledStmt;
  private readonly deleteDeliveriesStmt;
  private readonly deleteEndpointStmt;
  private readonly insertDeliveryStmt;
  private readonly dueStmt;
  private readonly claimStmt;
  private readonly attemptRowStmt;
  private readonly updateAttemptStmt;
  private readonly disableEndpointStmt;
  private readonly failPendingStmt;
  private readonly byEndpointStmt;
  private readonly byAccountStmt;
  private readonly allStmt;
  private readonly retryStmt;
  private readonly pruneStmt;
  private readonly createTx;
  private readonly deleteTx;
  private readonly claimTx;
  private readonly attemptTx;

  constructor(
    db: Db,
    private readonly clock: Clock,
    private readonly accounts: Accounts,
  ) {
    this.countStmt = db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM webhook_endpoints WHERE account_id = ?');
    this.insertEndpointStmt = db.prepare<[string, number, string, string, string, number], EndpointRow>(
      `INSERT INTO webhook_endpoints (id, account_id, url, description, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)
       RETURNING ${ENDPOINT_COLUMNS}`,
    );
    this.listStmt = db.prepare<[number], EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = ? ORDER BY seq`);
    this.getStmt = db.prepare<[number, string], EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = ? AND id = ?`);
    this.enabledStmt = db.prepare<[number], { id: string }>('SELECT id FROM webhook_endpoints WHERE account_id = ? AND disabled_at IS NULL ORDER BY seq');
    this.deleteDeliveriesStmt = db.prepare<[string]>('DELETE FROM webhook_deliveries WHERE endpoint_id = ?');
    this.deleteEndpointStmt = db.prepare<[string]>('DELETE FROM webhook_endpoints WHERE id = ?');
    this.insertDeliveryStmt = db.prepare<[string, string, number, WebhookEventType, string, number, number]>(
      `INSERT INTO webhook_deliveries (id, endpoint_id, account_id, type, body, created_at, status, next_attempt_at)
       VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)`,
    );
    // CROSS JOIN keeps SQLite's planner on the picked rows first (a few), not on every delivery.
    this.dueStmt = db.prepare<[{ now: number; perEndpoint: number; perAccount: number; limit: number }], DeliveryRow & { url: string; secret: string }>(
      `${FAIR_DUE_SQL}
       SELECT ${D_COLUMNS}, e.url, e.secret
       FROM picked p CROSS JOIN webhook_deliveries d ON d.seq = p.seq CROSS JOIN webhook_endpoints e ON e.id = d.endpoint_id
       ORDER BY p.account_slot, p.endpoint_slot, d.next_attempt_at, d.seq`,
    );
    this.claimStmt = db.prepare<[number, string]>('UPDATE webhook_deliveries SET claimed_until = ? WHERE id = ?');
    this.attemptRowStmt = db.prepare<
      [string],
      { endpoint_id: string; status: string; delivered_at: number | null; next_attempt_at: number | null; ended_at: number | null }
    >('SELECT endpoint_id, status, delivered_at, next_attempt_at, ended_at FROM webhook_deliveries WHERE id = ?');
    this.updateAttemptStmt = db.prepare<[string, number | null, number | null, number | null, number | null, string | null, string]>(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, status = ?, next_attempt_at = ?, delivered_at = ?, ended_at = ?,
         last_status_code = ?, last_error = ?, claimed_until = NULL
       WHERE id = ?`,
    );
    this.disableEndpointStmt = db.prepare<[number, string]>('UPDATE webhook_endpoints SET disabled_at = coalesce(disabled_at, ?) WHERE id = ?');
    this.failPendingStmt = db.prepare<[number, string, string]>(
      `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, claimed_until = NULL, ended_at = ?, last_error = ?
       WHERE endpoint_id = ? AND status = 'pending'`,
    );
    this.byEndpointStmt = db.prepare<[number, string, number], DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE account_id = ? AND endpoint_id = ? ORDER BY seq DESC LIMIT ?`,
    );
    this.byAccountStmt = db.prepare<[number, number], DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE account_id = ? ORDER BY seq DESC LIMIT ?`,
    );
    this.allStmt = db.prepare<[number], DeliveryRow>(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries ORDER BY seq DESC LIMIT ?`);
    this.retryStmt = db.prepare<[number, string]>(
      `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ?, claimed_until = NULL, ended_at = NULL
       WHERE id = ? AND status IN ('pending', 'failed')`,
    );
    this.pruneStmt = db.prepare<[number, number]>(
      `DELETE FROM webhook_deliveries WHERE seq IN (
         SELECT seq FROM webhook_deliveries WHERE status <> 'pending' AND ended_at < ? ORDER BY ended_at LIMIT ?)`,
    );

    // The count and the insert in one write transaction: concurrent creates cannot pass the limit.
    this.createTx = db.transaction((accountId: number, url: string, description: string, maxEndpoints: number): CreatedWebhookEndpoint | null => {
      this.accounts.requireRow(accountId);
      if (this.countStmt.get(accountId)!.n >= maxEndpoints) return null;
      const secret = generateWebhookSecret();
      const row = this.insertEndpointStmt.get(newId('wh_'), accountId, url, description, secret, this.clock().getTime())!;
      return { endpoint: toEndpoint(row), secret };
    });
    this.deleteTx = db.transaction((accountId: number, endpointId: string): boolean => {
      if (!this.getStmt.get(accountId, endpointId)) return false;
      this.deleteDeliveriesStmt.run(endpointId);
      this.deleteEndpointStmt.run(endpointId);
      return true;
    });
    this.claimTx = db.transaction((limit: number, leaseMs: number, caps: ClaimCaps): ClaimedDelivery[] => {
      const now = this.clock().getTime();
      const rows = this.dueStmt.all({ now, perEndpoint: caps.perEndpoint, perAccount: caps.perAccount, limit });
      for (const row of rows) this.claimStmt.run(now + leaseMs, row.id);
      return rows.map(({ url, secret, ...row }) => ({ ...toDelivery(row), url, secret }));
    });
    this.attemptTx = db.transaction((deliveryId: string, outcome: DeliveryOutcome): void => {
      const before = this.attemptRowStmt.get(deliveryId);
      if (!before) return; // its endpoint was deleted meanwhile: nothing left to record
      const now = this.clock().getTime();
      const next = afterAttempt(before, outcome, now);
      if (outcome.disableEndpoint) {
        this.disableEndpointStmt.run(now, before.endpoint_id);
        this.failPendingStmt.run(now, ENDPOINT_DISABLED_ERROR, before.endpoint_id);
      }
      // After failPending: this row's own outcome (its status code and error) is what it keeps.
      this.updateAttemptStmt.run(next.status, next.nextAttemptAt, next.deliveredAt, next.endedAt, outcome.statusCode, clipError(outcome.error), deliveryId);
    });
  }

  create(accountId: number, input: { url: string; description: string; maxEndpoints: number }): CreatedWebhookEndpoint | null {
    checkEndpointInput(input);
    return this.createTx.immediate(accountId, input.url, input.description, input.maxEndpoints);
  }

  list(accountId: number): WebhookEndpoint[] {
    return this.listStmt.all(accountId).map(toEndpoint);
  }

  get(accountId: number, endpointId: string): WebhookEndpoint | null {
    const row = this.getStmt.get(accountId, endpointId);
    return row ? toEndpoint(row) : null;
  }

  delete(accountId: number, endpointId: string): boolean {
    return this.deleteTx.immediate(accountId, endpointId);
  }

  sendTest(accountId: number, endpointId: string): boolean {
    const endpoint = this.getStmt.get(accountId, endpointId);
    if (!endpoint) return false;
    const now = this.clock().getTime();
    const body = eventBody('webhook.test', now, webhookTestData(endpoint.id));
    this.insertDeliveryStmt.run(newId('msg_'), endpoint.id, accountId, 'webhook.test', body, now, now);
    return true;
  }

  /**
   * Writes one event for each of the account's enabled endpoints, due now. No transaction of its
   * own: the caller's transaction makes the event part of the change it reports. Returns how many
   * rows it wrote.
   */
  enqueue(accountId: number, type: WebhookEventType, data: Record<string, unknown>, nowMs: number): number {
    const endpoints = this.enabledStmt.all(accountId);
    if (endpoints.length === 0) return 0;
    const body = eventBody(type, nowMs, data);
    for (const { id } of endpoints) this.insertDeliveryStmt.run(newId('msg_'), id, accountId, type, body, nowMs, nowMs);
    return endpoints.length;
  }

  claimDue(limit: number, leaseMs: number, caps: ClaimCaps = NO_CLAIM_CAPS): ClaimedDelivery[] {
    checkClaimCaps(caps);
    return this.claimTx.immediate(checkPositiveInteger('limit', limit), checkPositiveInteger('leaseMs', leaseMs), caps);
  }

  prune(endedBefore: Date, limit: number): number {
    return this.pruneStmt.run(endedBefore.getTime(), checkPositiveInteger('limit', limit)).changes;
  }

  recordAttempt(deliveryId: string, outcome: DeliveryOutcome): void {
    this.attemptTx.immediate(deliveryId, outcome);
  }

  deliveries(accountId: number, endpointId: string, limit: number): WebhookDelivery[] {
    return this.byEndpointStmt.all(accountId, endpointId, checkPositiveInteger('limit', limit)).map(toDelivery);
  }

  recentDeliveries(accountId: number | undefined, limit: number): WebhookDelivery[] {
    checkPositiveInteger('limit', limit);
    const rows = accountId === undefined ? this.allStmt.all(limit) : this.byAccountStmt.all(accountId, limit);
    return rows.map(toDelivery);
  }

  retry(deliveryId: string): boolean {
    checkId('deliveryId', deliveryId, true);
    return this.retryStmt.run(this.clock().getTime(), deliveryId).changes > 0;
  }
}
