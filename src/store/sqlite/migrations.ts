/**
 * The schema, as numbered migrations: MIGRATIONS[i] takes the database from version i to i + 1
 * (`PRAGMA user_version`). Append new migrations; never edit one that has shipped.
 *
 * Conventions: times are INTEGER milliseconds since the Unix epoch (UTC); tables are STRICT.
 * No image data is ever stored: at most the SHA-256 of an upload, kept only while an
 * Idempotency-Key needs it (24 h).
 */
import { outboxEndedMigration } from '../outbox-ended-migration.js';

export const MIGRATIONS: readonly string[] = [
  // 1: accounts, API keys, credits.
  `
  CREATE TABLE accounts (
    id               INTEGER PRIMARY KEY,
    email            TEXT    NOT NULL,                -- as given (trimmed)
    email_normalized TEXT    NOT NULL UNIQUE,         -- lower-cased: emails are unique case-insensitively
    plan             TEXT    NOT NULL CHECK (plan IN ('free', 'pro', 'ultra', 'mega')),
    created_at       INTEGER NOT NULL,                -- sign-up time = billing-cycle anchor
    cancel_at        INTEGER,                         -- a cancelled paid plan ends here (end of its cycle): Free from then on
    disabled_at      INTEGER,                         -- not null: disabled (the service answers 403)
    password_hash    TEXT                             -- reserved for the dashboard
  ) STRICT;

  CREATE TABLE api_keys (
    id           INTEGER PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts (id),
    key_hash     BLOB    NOT NULL UNIQUE CHECK (length(key_hash) = 32), -- SHA-256 of the whole key
    prefix       TEXT    NOT NULL UNIQUE,             -- display prefix, e.g. rb-sk_Ab3dE9
    last4        TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
  ) STRICT;
  CREATE INDEX api_keys_by_account ON api_keys (account_id);

  -- Requests in flight: each holds one credit until commit (charge) or release.
  CREATE TABLE reservations (
    id              INTEGER PRIMARY KEY,
    account_id      INTEGER NOT NULL REFERENCES accounts (id),
    api_key_id      INTEGER REFERENCES api_keys (id),
    owner           TEXT    NOT NULL,                 -- the Store instance (process) that made it
    request_id      TEXT    NOT NULL,
    idempotency_key TEXT,
    image_hash      TEXT,
    cycle_index     INTEGER NOT NULL,                 -- the cycle whose balance admitted it
    created_at      INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX reservations_by_account_cycle ON reservations (account_id, cycle_index);
  CREATE UNIQUE INDEX reservations_by_idempotency_key ON reservations (account_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
  CREATE INDEX reservations_by_owner ON reservations (owner);

  -- The ledger: one row per successful (charged) request, 1 credit each.
  CREATE TABLE charges (
    id          INTEGER PRIMARY KEY,
    account_id  INTEGER NOT NULL REFERENCES accounts (id),
    api_key_id  INTEGER REFERENCES api_keys (id),
    request_id  TEXT    NOT NULL,
    cycle_index INTEGER NOT NULL,
    charged_at  INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX charges_by_account_cycle ON charges (account_id, cycle_index, charged_at);
  CREATE INDEX charges_by_time ON charges (charged_at);

  -- Per account and cycle: credits charged (= its rows in charges) and extra credits granted.
  -- A cycle without a row has used nothing: credits reset at each cycle start without any cron job.
  CREATE TABLE cycle_usage (
    account_id  INTEGER NOT NULL REFERENCES accounts (id),
    cycle_index INTEGER NOT NULL,
    used        INTEGER NOT NULL DEFAULT 0 CHECK (used >= 0),
    granted     INTEGER NOT NULL DEFAULT 0 CHECK (granted >= 0),
    PRIMARY KEY (account_id, cycle_index)
  ) STRICT, WITHOUT ROWID;

  -- Operator grants (audit trail of cycle_usage.granted).
  CREATE TABLE grants (
    id          INTEGER PRIMARY KEY,
    account_id  INTEGER NOT NULL REFERENCES accounts (id),
    cycle_index INTEGER NOT NULL,
    credits     INTEGER NOT NULL CHECK (credits > 0),
    note        TEXT,
    granted_at  INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX grants_by_account ON grants (account_id, cycle_index);

  -- Idempotency-Key records of charged requests, valid for 24 h (purged lazily).
  CREATE TABLE idempotency_keys (
    account_id      INTEGER NOT NULL REFERENCES accounts (id),
    idempotency_key TEXT    NOT NULL,
    image_hash      TEXT    NOT NULL,
    charge_id       INTEGER NOT NULL REFERENCES charges (id),
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (account_id, idempotency_key)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX idempotency_keys_by_time ON idempotency_keys (created_at);
  `,
  // 2: dashboard sessions (accounts.password_hash, reserved in 1, holds the scrypt hash).
  `
  CREATE TABLE sessions (
    id          INTEGER PRIMARY KEY,
    token_hash  BLOB    NOT NULL UNIQUE CHECK (length(token_hash) = 32), -- SHA-256 of the cookie's 32 random bytes
    account_id  INTEGER NOT NULL REFERENCES accounts (id),
    csrf_token  TEXT    NOT NULL,                 -- synchronizer token of this session's forms
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX sessions_by_account ON sessions (account_id);
  CREATE INDEX sessions_by_expiry ON sessions (expires_at);
  `,
  // 3: webhook endpoints, the delivery outbox, and batches' metadata (never their image bytes).
  `
  CREATE TABLE webhook_endpoints (
    seq          INTEGER PRIMARY KEY,                 -- creation order (ids are random)
    id           TEXT    NOT NULL UNIQUE,             -- wh_...
    account_id   INTEGER NOT NULL REFERENCES accounts (id),
    url          TEXT    NOT NULL,
    description  TEXT    NOT NULL,
    secret       TEXT    NOT NULL,                    -- whsec_...: kept as is, deliveries are signed with it
    created_at   INTEGER NOT NULL,
    disabled_at  INTEGER                              -- a delivery got 410 Gone: no more events for it
  ) STRICT;
  CREATE INDEX webhook_endpoints_by_account ON webhook_endpoints (account_id);

  -- The outbox: one row per event and endpoint, written in the transaction of the change it reports.
  CREATE TABLE webhook_deliveries (
    seq              INTEGER PRIMARY KEY,             -- write order: newest first, oldest due first
    id               TEXT    NOT NULL UNIQUE,         -- msg_...: the webhook-id header, the same on every retry
    endpoint_id      TEXT    NOT NULL REFERENCES webhook_endpoints (id),
    account_id       INTEGER NOT NULL REFERENCES accounts (id),
    type             TEXT    NOT NULL CHECK (type IN ('image.processed', 'batch.completed', 'webhook.test')),
    body             TEXT    NOT NULL,                -- the JSON sent and signed, fixed at write time
    created_at       INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    next_attempt_at  INTEGER,                         -- pending: due from then on
    claimed_until    INTEGER,                         -- a sender holds it until then; lapsed: due again
    last_status_code INTEGER,
    last_error       TEXT,
    delivered_at     INTEGER
  ) STRICT;
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
  CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, seq);
  CREATE INDEX webhook_deliveries_by_account ON webhook_deliveries (account_id, seq);

  CREATE TABLE batches (
    seq          INTEGER PRIMARY KEY,                 -- submission order (ids are random)
    id           TEXT    NOT NULL UNIQUE,             -- bat_...
    account_id   INTEGER NOT NULL REFERENCES accounts (id),
    api_key_id   INTEGER REFERENCES api_keys (id),
    request_id   TEXT    NOT NULL,                    -- the submission's X-Request-ID
    owner        TEXT    NOT NULL,                    -- the Store instance holding its images in memory
    options      TEXT    NOT NULL,                    -- JSON object of the /remove option fields
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,                    -- results are dropped then
    completed_at INTEGER,                             -- every image ended
    deleted_at   INTEGER                              -- DELETE: invisible from then on
  ) STRICT;
  CREATE INDEX batches_by_account ON batches (account_id, seq);
  CREATE INDEX batches_unended_by_owner ON batches (owner) WHERE completed_at IS NULL;

  CREATE TABLE batch_images (
    id              TEXT    PRIMARY KEY,              -- img_...
    batch_id        TEXT    NOT NULL REFERENCES batches (id),
    position        INTEGER NOT NULL CHECK (position >= 0),
    filename        TEXT    NOT NULL,
    status          TEXT    NOT NULL CHECK (status IN ('queued', 'processing', 'succeeded', 'failed')),
    request_id      TEXT    NOT NULL,                 -- its result's X-Request-ID and its charge's request_id
    reservation_id  INTEGER,                          -- the credit it holds until it ends (no foreign key:
                                                      -- recoverAfterCrash may drop the reservation first)
    width           INTEGER,
    height          INTEGER,
    format          TEXT,
    credits_charged INTEGER NOT NULL DEFAULT 0 CHECK (credits_charged IN (0, 1)),
    error_code      TEXT,
    error_message   TEXT,
    finished_at     INTEGER,
    UNIQUE (batch_id, position)
  ) STRICT;
  `,
  // 4: when a delivery ended (delivered or failed), for the outbox's retention: the statements
  // are PostgreSQL's 3 too (../outbox-ended-migration.ts).
  outboxEndedMigration('INTEGER'),
  // 5: the database's own secret, one row written by the first process that asks for it
  // (Store.serverKey): every process on the file derives the same keys from it.
  `
  CREATE TABLE server_key (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    secret     BLOB    NOT NULL CHECK (length(secret) = 32), -- 32 random bytes
    created_at INTEGER NOT NULL
  ) STRICT;
  `,
];

/** The schema version this build writes and understands. */
export const SCHEMA_VERSION = MIGRATIONS.length;
