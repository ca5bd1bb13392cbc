/**
 * The schema, as numbered migrations: MIGRATIONS[i] takes the database from version i to i + 1
 * (`PRAGMA user_version`). Append new migrations; never edit one that has shipped.
 *
 * Conventions: times are INTEGER milliseconds since the Unix epoch (UTC); tables are STRICT.
 * No image data is ever stored: at most the SHA-256 of an upload, kept only while an
 * Idempotency-Key needs it (24 h).
 */
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
];

/** The schema version this build writes and understands. */
export const SCHEMA_VERSION = MIGRATIONS.length;
