/**
 * Sign-up and login on the store's accounts.
 *
 * No account enumeration: a login with an unknown email, an account without a password, or a wrong
 * password gets one message, after the same scrypt work. A sign-up whose email is taken gets the
 * same answer as one whose email is invalid ("check your details"), after the same scrypt work;
 * password rules are checked first and do not depend on any account. Failed attempts are throttled
 * per email and per IP by the store's login throttle (shared by every node on one database).
 */
import type { Account, LoginLimits, Store } from '../store/index.js';
import { normalizeEmail, StoreError } from '../store/index.js';
import { DEFAULT_SCRYPT, hashPassword, passwordProblem, type ScryptParams, verifyPassword } from './passwords.js';

export const LOGIN_FAILED = 'Wrong email or password.';
export const SIGNUP_FAILED = 'We could not create an account with these details. Check the email address, or log in if you already have an account.';
const MAX_EMAIL_LENGTH = 254;

export type AuthFailure = { ok: false; status: 400 | 401 | 429; message: string; retryAfterSeconds?: number };
export type SignUpResult = { ok: true; account: Account; key: string } | AuthFailure;
export type LoginResult = { ok: true; account: Account } | AuthFailure;

export class AuthService {
  constructor(
    private readonly store: Store,
    private readonly limits: LoginLimits,
    private readonly scrypt: ScryptParams = DEFAULT_SCRYPT,
  ) {}

  /** A Free account with this password and its first API key (returned once), in one transaction. */
  async signUp(email: string, password: string, ip: string): Promise<SignUpResult> {
    const throttle = this.store.loginThrottle;
    const gate = await throttle.begin(undefined, ip, this.limits);
    if (!gate.allowed) return { ok: false, status: 429, message: 'Too many attempts.', retryAfterSeconds: gate.retryAfterSeconds };
    const problem = passwordProblem(password);
    if (problem) {
      await throttle.forgive(gate.attempt);
      return { ok: false, status: 400, message: problem };
    }
    try {
      const hash = await hashPassword(password, this.scrypt); // before looking at the email: same time either way
      const created = await this.store.accounts.createWithPassword({ email, passwordHash: hash });
      await throttle.forgive(gate.attempt);
      return { ok: true, ...created };
    } catch (err) {
      // A taken or invalid email stays counted against the IP.
      if (err instanceof StoreError && (err.code === 'email_taken' || err.code === 'invalid_argument'))
        return { ok: false, status: 400, message: SIGNUP_FAILED };
      await throttle.forgive(gate.attempt);
      throw err;
    }
  }

  async logIn(email: string, password: string, ip: string): Promise<LoginResult> {
    const key = normalizeEmail(email).slice(0, MAX_EMAIL_LENGTH + 1);
    const throttle = this.store.loginThrottle;
    const gate = await throttle.begin(key, ip, this.limits);
    if (!gate.allowed) return { ok: false, status: 429, message: 'Too many attempts.', retryAfterSeconds: gate.retryAfterSeconds };
    const account = email.length <= MAX_EMAIL_LENGTH ? await this.store.accounts.getByEmail(email) : null;
    const ok = await verifyPassword(password, account ? await this.store.accounts.passwordHash(account.id) : null, this.scrypt);
    if (!ok || !account) return { ok: false, status: 401, message: LOGIN_FAILED }; // stays counted
    await throttle.succeed(gate.attempt);
    // Read again: the account may have changed during the scrypt work (accounts are never deleted).
    return { ok: true, account: (await this.store.accounts.get(account.id)) ?? account };
  }
}
