/**
 * The migration that records when an outbox delivery ended, the same in both dialects (PostgreSQL's
 * 3, SQLite's 4): its statements are one text, written once here so that the two databases cannot
 * get different indexes, and only the column's type is each dialect's own (their time type:
 * BIGINT in PostgreSQL, INTEGER in SQLite).
 *
 * Ended rows (delivered or failed) are pruned after the retention period (BGONE_WEBHOOK_RETENTION)
 * so that the outbox stays small. Rows that ended before this migration count from their delivery,
 * or else from their creation.
 *
 * A shipped migration, like every other: never edit it.
 */
export function outboxEndedMigration(timeType: 'BIGINT' | 'INTEGER'): string {
  return `
  ALTER TABLE webhook_deliveries ADD COLUMN ended_at ${timeType};
  UPDATE webhook_deliveries SET ended_at = coalesce(delivered_at, created_at) WHERE status <> 'pending';
  CREATE INDEX webhook_deliveries_ended ON webhook_deliveries (ended_at) WHERE status <> 'pending';
  -- The live claims, counted by every claim against the per-endpoint and per-account caps.
  CREATE INDEX webhook_deliveries_claimed ON webhook_deliveries (claimed_until) WHERE status = 'pending';
  -- Each endpoint's oldest due rows, probed by every claim (batch-rules.ts FAIR_DUE_SQL).
  CREATE INDEX webhook_deliveries_pending_by_endpoint ON webhook_deliveries (endpoint_id, next_attempt_at, seq) WHERE status = 'pending';
  `;
}
