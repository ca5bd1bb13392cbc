/**
 * The rules every store implementation applies the same way, kept out of the SQL so that a second
 * implementation cannot drift from the first: what a valid email, plan, request id or grant is, how
 * emails compare, which plan is in effect after a cancellation, and the store's time windows.
 */
import { StoreError } from './errors.js';
import { isPlanName, type PlanName } from './plans.js';

/** How long an Idempotency-Key protects against a second charge. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** Default lifetime of a dashboard session, from login (fixed, not sliding). */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** Default: a key's last use is written at most once a minute, to keep writes off the request path. */
export const LAST_USED_RESOLUTION_MS = 60_000;
/**
 * Default: active (unrevoked) API keys an account may hold. Rate limits count per account as well
 * as per key, so more keys would buy nothing; the cap keeps an account from minting them without end.
 */
export const MAX_KEYS_PER_ACCOUNT = 10;

const MAX_EMAIL_LENGTH = 254;
const MAX_LOCAL_PART_LENGTH = 64;
const MAX_DOMAIN_LENGTH = 253;
const MAX_ID_LENGTH = 255;

/**
 * The local part: dot-separated runs of letters and digits of any script and the symbols
 * ! # $ % & ' * + / = ? ^ _ { | } ~ -. No quoted forms, and none of < > " ` ( ) , ; : [ ] \ @,
 * spaces or controls: an email is shown on pages and in logs, and these serve no real address.
 * The apostrophe stays: real addresses carry it (o'brien@...), and every page escapes it.
 */
const LOCAL_PART = /^[\p{L}\p{M}\p{N}!#$%&'*+/=?^_{|}~-]+(?:\.[\p{L}\p{M}\p{N}!#$%&'*+/=?^_{|}~-]+)*$/u;
/** A domain label: letters, digits and hyphens (LDH), 1 to 63, no hyphen at either end. */
const DOMAIN_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
/** The top-level label: letters, or an internationalised one in punycode. */
const TOP_LEVEL_LABEL = /^(?:[A-Za-z]+|xn--[A-Za-z0-9-]*[A-Za-z0-9])$/;

/** Whether `email` (trimmed, NFC) is an address of the form the service accepts (docs/contract.md, "User text"). */
function isEmailAddress(email: string): boolean {
  if (email.length > MAX_EMAIL_LENGTH) return false;
  const at = email.indexOf('@');
  if (at < 1 || at !== email.lastIndexOf('@')) return false;
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local.length > MAX_LOCAL_PART_LENGTH || !LOCAL_PART.test(local)) return false;
  if (domain.length > MAX_DOMAIN_LENGTH) return false;
  const labels = domain.split('.');
  // One label only for `localhost`: the account `bgone serve` creates on a fresh database.
  if (labels.length < 2) return domain.toLowerCase() === 'localhost';
  return labels.every((label) => DOMAIN_LABEL.test(label)) && TOP_LEVEL_LABEL.test(labels[labels.length - 1]!);
}

/** The form in which emails are compared (unique case-insensitively). */
export function normalizeEmail(email: string): string {
  return email.trim().normalize('NFC').toLowerCase();
}

/**
 * The email as it is kept (trimmed, NFC); throws StoreError 'invalid_argument' for anything else
 * than `local@domain` with the local part above, at most 64 characters, and a domain of at least
 * two LDH labels (at most 253 characters, the last of letters or punycode), 254 in all.
 */
export function checkEmail(email: unknown): string {
  if (typeof email !== 'string') throw new StoreError('invalid_argument', 'email must be a string');
  const trimmed = email.trim().normalize('NFC');
  if (!isEmailAddress(trimmed)) throw new StoreError('invalid_argument', `not a valid email address: ${JSON.stringify(email)}`);
  return trimmed;
}

export function checkPlan(plan: unknown): PlanName {
  if (!isPlanName(plan)) throw new StoreError('invalid_argument', `unknown plan: ${JSON.stringify(plan)}`);
  return plan;
}

/** Request ids, Idempotency-Keys and image hashes: 1 to 255 characters. */
export function checkId(name: string, value: unknown, required: boolean): void {
  if (value === undefined && !required) return;
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_ID_LENGTH) {
    throw new StoreError('invalid_argument', `${name} must be a string of 1 to ${MAX_ID_LENGTH} characters`);
  }
}

export function checkGrant(credits: unknown): number {
  if (typeof credits !== 'number' || !Number.isSafeInteger(credits) || credits < 1)
    throw new StoreError('invalid_argument', 'credits must be a positive integer');
  return credits;
}

export function checkPasswordHash(encodedHash: unknown): string {
  if (typeof encodedHash !== 'string' || encodedHash.length === 0) throw new StoreError('invalid_argument', 'password hash must be a non-empty string');
  return encodedHash;
}

/** The maxKeysPerAccount option: a positive integer; throws a RangeError otherwise. */
export function checkMaxKeys(value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`maxKeysPerAccount must be a positive integer, got ${String(value)}`);
  return value;
}

/** keys.create's refusal past the cap, the same from every implementation. */
export function keyLimitError(accountId: number, max: number): StoreError {
  return new StoreError('key_limit', `account ${accountId} already has ${max} active API keys, the most allowed: revoke one before creating another`);
}

/** A duration option in whole milliseconds (0 allowed only where `allowZero`); throws a RangeError naming it. */
export function checkDurationMs(name: string, value: number, allowZero: boolean): number {
  if (!Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new RangeError(`${name} must be a ${allowZero ? 'non-negative' : 'positive'} integer (milliseconds), got ${String(value)}`);
  }
  return value;
}

/**
 * The plan in effect at `atMs`: a cancelled paid plan is not downgraded by a job; its end
 * (`cancelAtMs`) is stored and the plan is evaluated lazily, the subscribed plan before that time
 * and Free from then on.
 */
export function effectivePlanAt(subscribed: PlanName, cancelAtMs: number | null, atMs: number): PlanName {
  return cancelAtMs !== null && atMs >= cancelAtMs ? 'free' : subscribed;
}
