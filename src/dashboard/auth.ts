/**
 * Sign-up and login on the store's accounts.
 *
 * No account enumeration: a login with an unknown email, an account without a password, or a wrong
 * password gets one message, after the same scrypt work. A sign-up whose email is taken gets the
 * same answer as one whose email is invalid ("check your details"), after the same scrypt work;
 * password rules are checked first and do not depend on any account. Failed attempts are throttled
 * per email and per IP by the store's login throttle (shared by every node on one database).
 *
 * Sign-ups are also counted per address block for an hour (an IPv4 address, an IPv6 /64:
 * address-block.ts), successful ones included (each account comes with free credits), in the same
 * throttle under a key of their own ("signup:" + the block) with a one-hour window: shared by every
 * node like the failures. The scrypt work goes through the
 * PasswordHasher, which bounds it; a refusal there takes the attempt back (no work was done).
 */
import { hasControlCharacter } from '../service/user-text.js';
import type { Account, LimitDecision, LoginLimits, Store } from '../store/index.js';
import { normalizeEmail, StoreError } from '../store/index.js';
import { addressBlock } from './address-block.js';
import { type PasswordHasher, PasswordWorkOverloaded, passwordProblem } from './passwords.js';

export const LOGIN_FAILED = 'Wrong email or password.';
export const SIGNUP_FAILED = 'We could not create an account with these details. Check the email address, or log in if you already have an account.';
export const ACCOUNT_DISABLED = 'This account is disabled. Contact the operator of this service.';
export const INVALID_EMAIL = 'That is not a valid email address.';
export const PASSWORD_WORK_BUSY = 'Too many sign-ups and logins are being processed right now. Try again in a few seconds.';
const MAX_EMAIL_LENGTH = 254;
const HOUR_MS = 60 * 60 * 1000;

/** Default of BGONE_SIGNUP_PER_IP_PER_HOUR. */
export const DEFAULT_SIGNUPS_PER_IP_PER_HOUR = 5;

export type AuthFailure = { ok: false; status: 400 | 401 | 403 | 429 | 503; message: string; retryAfterSeconds?: number };
export type SignUpResult = { ok: true; account: Account; key: string } | AuthFailure;
export type LoginResult = { ok: true; account: Account } | AuthFailure;

/**
 * The sign-up counter's key in the login throttle: apart from the address's login failures, and
 * per block, since one IPv6 client holds a whole /64 of addresses.
 */
function signupKey(ip: string): string {
  return `signup:${addressBlock(ip)}`;
}

function tooMany(decision: LimitDecision & { allowed: false }, message: string): AuthFailure {
  return { ok: false, status: 429, message, retryAfterSeconds: decision.retryAfterSeconds };
}

function busy(err: PasswordWorkOverloaded): AuthFailure {
  return { ok: false, status: 503, message: PASSWORD_WORK_BUSY, retryAfterSeconds: err.retryAfterSeconds };
}

export class AuthService {
  private readonly signupLimits: LoginLimits;

  constructor(
    private readonly store: Store,
    private readonly limits: LoginLimits,
    private readonly hasher: PasswordHasher,
    signupsPerIpPerHour = DEFAULT_SIGNUPS_PER_IP_PER_HOUR,
  ) {
    if (!Number.isSafeInteger(signupsPerIpPerHour) || signupsPerIpPerHour < 1) throw new RangeError('signupsPerIpPerHour must be a positive integer');
    const rule = { maxFailures: signupsPerIpPerHour, windowMs: HOUR_MS };
    this.signupLimits = { perEmail: rule, perIp: rule };
  }

  /** A Free account with this password and its first API key (returned once), in one transaction. */
  async signUp(email: string, password: string, ip: string): Promise<SignUpResult> {
    // Malformed text names no account: refused before any count or work, like a bad password.
    if (hasControlCharacter(email)) return { ok: false, status: 400, message: INVALID_EMAIL };
    const throttle = this.store.loginThrottle;
    const signup = await throttle.begin(undefined, signupKey(ip), this.signupLimits);
    if (!signup.allowed) return tooMany(signup, `Too many sign-ups from your network address: at most ${this.signupLimits.perIp.maxFailures} an hour.`);
    const gate = await throttle.begin(undefined, ip, this.limits);
    if (!gate.allowed) {
      await throttle.forgive(signup.attempt);
      return tooMany(gate, 'Too many failed attempts.');
    }
    const problem = passwordProblem(password);
    if (problem) {
      // Nothing was tried: a typo in the password costs neither count.
      await throttle.forgive(signup.attempt);
      await throttle.forgive(gate.attempt);
      return { ok: false, status: 400, message: problem };
    }
    try {
      const hash = await this.hasher.hash(password); // before looking at the email: same time either way
      const created = await this.store.accounts.createWithPassword({ email, passwordHash: hash });
      // No failure, but still a sign-up: it stays counted against the address for the hour.
      await throttle.forgive(gate.attempt);
      return { ok: true, ...created };
    } catch (err) {
      // A taken or invalid email stays counted against the IP, in both counts.
      if (err instanceof StoreError && (err.code === 'email_taken' || err.code === 'invalid_argument'))
        return { ok: false, status: 400, message: SIGNUP_FAILED };
      await throttle.forgive(signup.attempt);
      await throttle.forgive(gate.attempt);
      if (err instanceof PasswordWorkOverloaded) return busy(err);
      throw err;
    }
  }

  async logIn(email: string, password: string, ip: string): Promise<LoginResult> {
    if (hasControlCharacter(email)) return { ok: false, status: 400, message: INVALID_EMAIL };
    const key = normalizeEmail(email).slice(0, MAX_EMAIL_LENGTH + 1);
    const throttle = this.store.loginThrottle;
    const gate = await throttle.begin(key, ip, this.limits);
    if (!gate.allowed) return tooMany(gate, 'Too many failed attempts.');
    const account = email.length <= MAX_EMAIL_LENGTH ? await this.store.accounts.getByEmail(email) : null;
    let ok: boolean;
    try {
      ok = await this.hasher.verify(password, account ? await this.store.accounts.passwordHash(account.id) : null);
    } catch (err) {
      if (!(err instanceof PasswordWorkOverloaded)) throw err;
      await throttle.forgive(gate.attempt); // no password was checked: no guess
      return busy(err);
    }
    if (!ok || !account) return { ok: false, status: 401, message: LOGIN_FAILED }; // stays counted
    await throttle.succeed(gate.attempt);
    // Read again: the account may have changed during the scrypt work (accounts are never deleted).
    const current = (await this.store.accounts.get(account.id)) ?? account;
    // Disabling ends an account's sessions; it cannot start new ones. Said only after the right password.
    if (current.disabled) return { ok: false, status: 403, message: ACCOUNT_DISABLED };
    return { ok: true, account: current };
  }
}
