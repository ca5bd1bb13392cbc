/**
 * The rows both implementations store (SQLite and PostgreSQL keep the same columns, times as
 * milliseconds since the epoch) and their one conversion into the interface's values, so that an
 * account, a key or a session reads the same whichever database answered.
 */
import type { PlanName, PlanTable } from './plans.js';
import { effectivePlanAt } from './rules.js';
import type { Account, ApiKeyInfo, Authenticated, Session } from './store.js';

/** A row of the accounts table (the password hash is never read with it). */
export interface AccountRow {
  id: number;
  email: string;
  plan: PlanName;
  created_at: number;
  cancel_at: number | null;
  disabled_at: number | null;
}
export const ACCOUNT_COLUMNS = 'id, email, plan, created_at, cancel_at, disabled_at';

export interface KeyRow {
  id: number;
  account_id: number;
  prefix: string;
  last4: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}
export const KEY_COLUMNS = 'id, account_id, prefix, last4, created_at, last_used_at, revoked_at';

/** A key and the account fields authentication needs, read in one statement (a join). */
export interface KeyAccountRow {
  id: number;
  account_id: number;
  last_used_at: number | null;
  revoked_at: number | null;
  plan: PlanName;
  cancel_at: number | null;
  disabled_at: number | null;
}

/** A reservation: one credit held by a request in flight. */
export interface ReservationRow {
  id: number;
  account_id: number;
  api_key_id: number | null;
  request_id: string;
  idempotency_key: string | null;
  image_hash: string | null;
  cycle_index: number;
}

export interface SessionRow {
  id: number;
  account_id: number;
  csrf_token: string;
  created_at: number;
  expires_at: number;
}
export const SESSION_COLUMNS = 'id, account_id, csrf_token, created_at, expires_at';

const dateOrNull = (ms: number | null): Date | null => (ms === null ? null : new Date(ms));

/** The account as of `nowMs` (a cancellation that took effect shows the Free plan). */
export function toAccount(row: AccountRow, nowMs: number): Account {
  return {
    id: row.id,
    email: row.email,
    plan: effectivePlanAt(row.plan, row.cancel_at, nowMs),
    subscribedPlan: row.plan,
    createdAt: new Date(row.created_at),
    cancelAt: dateOrNull(row.cancel_at),
    disabled: row.disabled_at !== null,
    disabledAt: dateOrNull(row.disabled_at),
  };
}

export function toKeyInfo(row: KeyRow): ApiKeyInfo {
  return {
    id: row.id,
    accountId: row.account_id,
    prefix: row.prefix,
    last4: row.last4,
    createdAt: new Date(row.created_at),
    lastUsedAt: dateOrNull(row.last_used_at),
    revokedAt: dateOrNull(row.revoked_at),
    revoked: row.revoked_at !== null,
  };
}

export function toSession(row: SessionRow): Session {
  return { id: row.id, accountId: row.account_id, csrfToken: row.csrf_token, createdAt: new Date(row.created_at), expiresAt: new Date(row.expires_at) };
}

/** What a live key opens as of `nowMs`: the account and the limits of the plan in effect. */
export function toAuthenticated(row: KeyAccountRow, plans: PlanTable, nowMs: number): Authenticated {
  const plan = plans[effectivePlanAt(row.plan, row.cancel_at, nowMs)];
  return { keyId: row.id, accountId: row.account_id, disabled: row.disabled_at !== null, plan: plan.name, rateLimitPerMinute: plan.rateLimitPerMinute };
}
