/**
 * The PostgreSQL schema, as numbered migrations: MIGRATIONS[i] takes the database from version i
 * to i + 1 (rows of schema_migrations). Append new migrations; never edit one that has shipped.
 *
 * The same tables and meaning as SQLite's (../sqlite/migrations.ts), so that both implementations
 * answer alike. Conventions: ids are BIGINT identities; times are BIGINT milliseconds since the Unix
 * epoch (UTC), read from the store's injected clock, except nodes.heartbeat_at, which is the
 * database server's clock (one clock for every node, whatever their own clocks say). No image data
 * is ever stored: at most the SHA-256 of an upload, kept only while an Idempotency-Key needs it.
 */
import type { PoolClient } from 'pg';
import { StoreError } from '../errors.js';
import { outboxEndedMigration } from '../outbox-ended-migration.js';
import { RESERVE_GROUP_FUNCTION } from './reserve-group.js';

export const MIGRATIONS: readonly string[] = [
  // 1: accounts, API keys, credits, sessions, and the nodes that own reservations.
  `
  CREATE TABLE accounts (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email            TEXT   NOT NULL,
    email_normalized TEXT   NOT NULL UNIQUE,          -- lower-cased: emails are unique case-insensitively
    plan             TEXT   NOT NULL CHECK (plan IN ('free', 'pro', 'ultra', 'mega')),
    created_at       BIGINT NOT NULL,                 -- sign-up time = billing-cycle anchor
    cancel_at        BIGINT,                          -- a cancelled paid plan ends here: Free from then on
    disabled_at      BIGINT,                          -- not null: disabled (the service answers 403)
    password_hash    TEXT                             -- the dashboard's encoded scrypt hash
  );

  CREATE TABLE api_keys (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id   BIGINT NOT NULL REFERENCES accounts (id),
    key_hash     BYTEA  NOT NULL UNIQUE CHECK (length(key_hash) = 32), -- SHA-256 of the whole key
    prefix       TEXT   NOT NULL UNIQUE,              -- display prefix, e.g. rb-sk_Ab3dE9
    last4        TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
  );
  CREATE INDEX api_keys_by_account ON api_keys (account_id);

  -- The live bgone processes: each store instance refreshes its row every few seconds. A node
  -- whose heartbeat lapsed is dead, and its reservations are released by the others.
  CREATE TABLE nodes (
    id           TEXT   PRIMARY KEY,                  -- random per store instance
    started_at   BIGINT NOT NULL,                     -- database clock
    heartbeat_at BIGINT NOT NULL,                     -- database clock
    lapse_ms     BIGINT NOT NULL CHECK (lapse_ms > 0) -- dead once its heartbeat is older than this:
                                                      -- its own setting, whatever the judge's is
  );

  -- Requests in flight: each holds one credit until commit (charge) or release.
  CREATE TABLE reservations (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id      BIGINT NOT NULL REFERENCES accounts (id),
    api_key_id      BIGINT REFERENCES api_keys (id),
    owner           TEXT   NOT NULL,                  -- the node (store instance) that made it
    request_id      TEXT   NOT NULL,
    idempotency_key TEXT,
    image_hash      TEXT,
    cycle_index     INTEGER NOT NULL,                 -- the cycle whose balance admitted it
    created_at      BIGINT NOT NULL,
    CHECK ((idempotency_key IS NULL) = (image_hash IS NULL))
  );
  CREATE INDEX reservations_by_account_cycle ON reservations (account_id, cycle_index);
  -- One request in flight per Idempotency-Key and account.
  CREATE UNIQUE INDEX reservations_by_idempotency_key ON reservations (account_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
  CREATE INDEX reservations_by_owner ON reservations (owner);

  -- The ledger: one row per successful (charged) request, 1 credit each.
  CREATE TABLE charges (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  BIGINT NOT NULL REFERENCES accounts (id),
    api_key_id  BIGINT REFERENCES api_keys (id),
    request_id  TEXT   NOT NULL,
    cycle_index INTEGER NOT NULL,
    charged_at  BIGINT NOT NULL
  );
  CREATE INDEX charges_by_account_cycle ON charges (account_id, cycle_index, charged_at);
  CREATE INDEX charges_by_time ON charges (charged_at);

  -- Per account and cycle: credits charged (= its rows in charges) and extra credits granted.
  -- A cycle without a row has used nothing: credits reset at each cycle start without any job.
  CREATE TABLE cycle_usage (
    account_id  BIGINT  NOT NULL REFERENCES accounts (id),
    cycle_index INTEGER NOT NULL,
    used        INTEGER NOT NULL DEFAULT 0 CHECK (used >= 0),
    granted     INTEGER NOT NULL DEFAULT 0 CHECK (granted >= 0),
    PRIMARY KEY (account_id, cycle_index)
  );

  -- Operator grants (audit trail of cycle_usage.granted).
  CREATE TABLE grants (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  BIGINT  NOT NULL REFERENCES accounts (id),
    cycle_index INTEGER NOT NULL,
    credits     INTEGER NOT NULL CHECK (credits > 0),
    note        TEXT,
    granted_at  BIGINT  NOT NULL
  );
  CREATE INDEX grants_by_account ON grants (account_id, cycle_index);

  -- Idempotency-Key records of charged requests, valid for 24 h (purged lazily). The primary key
  -- makes a second record (and so a second charge under one key) impossible.
  CREATE TABLE idempotency_keys (
    account_id      BIGINT NOT NULL REFERENCES accounts (id),
    idempotency_key TEXT   NOT NULL,
    image_hash      TEXT   NOT NULL,
    charge_id       BIGINT NOT NULL REFERENCES charges (id),
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (account_id, idempotency_key)
  );
  CREATE INDEX idempotency_keys_by_time ON idempotency_keys (created_at);

  -- Dashboard sessions: only the SHA-256 of the cookie value is kept.
  CREATE TABLE sessions (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash  BYTEA  NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    account_id  BIGINT NOT NULL REFERENCES accounts (id),
    csrf_token  TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
  );
  CREATE INDEX sessions_by_account ON sessions (account_id);
  CREATE INDEX sessions_by_expiry ON sessions (expires_at);

  -- Rate-limit counters shared by every node: requests per bucket (an API key) and fixed minute.
  -- Windows older than the previous minute are deleted by the nodes' heartbeat ticks.
  CREATE TABLE rate_windows (
    bucket       TEXT    NOT NULL,
    window_start BIGINT  NOT NULL,
    count        INTEGER NOT NULL CHECK (count > 0),
    PRIMARY KEY (bucket, window_start)
  );

  -- Dashboard login and sign-up attempts counted as failures, per email and per client IP. key is
  -- a SHA-256 of the scope and the email or address: neither is stored. Purged after a day.
  CREATE TABLE login_failures (
    key        TEXT   NOT NULL,
    attempt_id TEXT   NOT NULL,
    at         BIGINT NOT NULL,
    PRIMARY KEY (key, attempt_id)
  );
  CREATE INDEX login_failures_by_attempt ON login_failures (attempt_id);
  CREATE INDEX login_failures_by_time ON login_failures (at);
  `,
  // 2: webhook endpoints, the delivery outbox, and batches' metadata (never their image bytes).
  `
  CREATE TABLE webhook_endpoints (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- creation order (ids are random)
    id           TEXT   NOT NULL UNIQUE,              -- wh_...
    account_id   BIGINT NOT NULL REFERENCES accounts (id),
    url          TEXT   NOT NULL,
    description  TEXT   NOT NULL,
    secret       TEXT   NOT NULL,                     -- whsec_...: kept as is, deliveries are signed with it
    created_at   BIGINT NOT NULL,
    disabled_at  BIGINT                               -- a delivery got 410 Gone: no more events for it
  );
  CREATE INDEX webhook_endpoints_by_account ON webhook_endpoints (account_id);

  -- The outbox: one row per event and endpoint, written in the transaction of the change it
  -- reports; any node sends any row (claimed_until keeps two nodes off one row).
  CREATE TABLE webhook_deliveries (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- write order: newest first, oldest due first
    id               TEXT    NOT NULL UNIQUE,         -- msg_...: the webhook-id header, the same on every retry
    endpoint_id      TEXT    NOT NULL REFERENCES webhook_endpoints (id),
    account_id       BIGINT  NOT NULL REFERENCES accounts (id),
    type             TEXT    NOT NULL CHECK (type IN ('image.processed', 'batch.completed', 'webhook.test')),
    body             TEXT    NOT NULL,                -- the JSON sent and signed, fixed at write time
    created_at       BIGINT  NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    next_attempt_at  BIGINT,                          -- pending: due from then on
    claimed_until    BIGINT,                          -- a node holds it until then; lapsed: due again
    last_status_code INTEGER,
    last_error       TEXT,
    delivered_at     BIGINT
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
  CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, seq);
  CREATE INDEX webhook_deliveries_by_account ON webhook_deliveries (account_id, seq);

  CREATE TABLE batches (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- submission order (ids are random)
    id           TEXT   NOT NULL UNIQUE,              -- bat_...
    account_id   BIGINT NOT NULL REFERENCES accounts (id),
    api_key_id   BIGINT REFERENCES api_keys (id),
    request_id   TEXT   NOT NULL,                     -- the submission's X-Request-ID
    owner        TEXT   NOT NULL,                     -- the node holding its images in memory
    options      TEXT   NOT NULL,                     -- JSON object of the /remove option fields
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,                     -- results are dropped then
    completed_at BIGINT,                              -- every image ended
    deleted_at   BIGINT                               -- DELETE: invisible from then on
  );
  CREATE INDEX batches_by_account ON batches (account_id, seq);
  CREATE INDEX batches_unended_by_owner ON batches (owner) WHERE completed_at IS NULL;

  CREATE TABLE batch_images (
    id              TEXT    PRIMARY KEY,              -- img_...
    batch_id        TEXT    NOT NULL REFERENCES batches (id),
    position        INTEGER NOT NULL CHECK (position >= 0),
    filename        TEXT    NOT NULL,
    status          TEXT    NOT NULL CHECK (status IN ('queued', 'processing', 'succeeded', 'failed')),
    request_id      TEXT    NOT NULL,                 -- its result's X-Request-ID and its charge's request_id
    reservation_id  BIGINT,                           -- the credit it holds until it ends (no foreign key:
                                                      -- a dead node's reservations are released apart)
    width           INTEGER,
    height          INTEGER,
    format          TEXT,
    credits_charged INTEGER NOT NULL DEFAULT 0 CHECK (credits_charged IN (0, 1)),
    error_code      TEXT,
    error_message   TEXT,
    finished_at     BIGINT,
    UNIQUE (batch_id, position)
  );
  `,
  // 3: when a delivery ended (delivered or failed), for the outbox's retention: the statements
  // are SQLite's 4 too (../outbox-ended-migration.ts).
  outboxEndedMigration('BIGINT'),
  // 4: batches on any node: where each node is reached, and which node holds what of an image.
  `
  ALTER TABLE nodes ADD COLUMN internal_url TEXT;     -- where its peers reach it (null: it shares no batch work)
  ALTER TABLE batch_images ADD COLUMN holder TEXT;    -- the node holding its bytes (queued) or its result
                                                      -- (succeeded); null: the batch's owner
  ALTER TABLE batch_images ADD COLUMN runner TEXT;    -- the node processing it (while 'processing')
  CREATE INDEX batch_images_queued ON batch_images (batch_id, position) WHERE status = 'queued';
  `,
  // 5: the database's own secret, one row written by the first node that asks for it
  // (Store.serverKey): every node derives the same keys from it.
  `
  CREATE TABLE server_key (
    id         SMALLINT PRIMARY KEY CHECK (id = 1),
    secret     BYTEA    NOT NULL CHECK (length(secret) = 32), -- 32 random bytes
    created_at BIGINT   NOT NULL
  );
  `,
  // 6: the digests of the cluster secrets each node accepts (src/cluster/secret.ts; never a
  // secret): a node that shares none with a live node refuses to start.
  `
  ALTER TABLE nodes ADD COLUMN secret_digests TEXT[];
  `,
  // 7: a group of reservations admitted in one statement (credits.ts): the accounts locked, then
  // each request decided and its reservation inserted, with no round trip while the locks are held.
  RESERVE_GROUP_FUNCTION,
];

/** The schema version this build writes and understands. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** Any constant shared by every bgone build: the advisory lock that serializes migrations. */
const MIGRATION_LOCK_KEY = 0x6267_6f6e; // 'bgon'

/**
 * Applies the migrations the database lacks, each in its own transaction with its
 * schema_migrations row, while holding a session advisory lock: several nodes starting at once
 * apply each migration once, the others wait and then find nothing to do. Throws StoreError
 * 'schema_too_new' for a database migrated by a newer build.
 */
export async function migrate(client: PoolClient): Promise<void> {
  // Waiting for another node's migrations, or a long migration, must not hit the statement timeout.
  await client.query('SET statement_timeout = 0');
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version    INTEGER PRIMARY KEY,
      applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM schema_migrations');
    let version = rows[0]?.version ?? 0;
    if (version > SCHEMA_VERSION) {
      throw new StoreError('schema_too_new', `database schema version ${version} is newer than this build understands (${SCHEMA_VERSION})`);
    }
    for (; version < SCHEMA_VERSION; version++) {
      await client.query('BEGIN');
      try {
        await client.query(MIGRATIONS[version]!);
        await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [version + 1]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    await client.query('RESET statement_timeout');
  }
}
