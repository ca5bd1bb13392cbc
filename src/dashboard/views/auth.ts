/** Sign-up and login forms (pre-login: their CSRF token is the signed double-submit one). */

import { html } from '../html.js';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../passwords.js';
import { csrfField, type Message, page } from './layout.js';

export interface AuthFormOptions {
  csrf: string;
  email?: string;
  message?: Message | null;
  /** Whether to offer sign-up (BGONE_SIGNUP); default true. */
  signupOpen?: boolean;
}

export function signupPage(options: AuthFormOptions): string {
  return page(
    { title: 'Sign up', narrow: true, message: options.message },
    html`<h1>Create your account</h1>
<div class="card">
<p class="muted small">The Free plan: 100 credits a month, no credit card. Your first API key is shown right after sign-up.</p>
<form method="post" action="/dashboard/signup" id="signup-form">
${csrfField(options.csrf)}
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="email" required maxlength="254" value="${options.email ?? ''}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="new-password" required minlength="${PASSWORD_MIN_LENGTH}" maxlength="${PASSWORD_MAX_LENGTH}" aria-describedby="password-help">
<p id="password-help" class="muted small">At least ${PASSWORD_MIN_LENGTH} characters.</p>
<div class="actions"><button type="submit">Sign up</button><span class="small">Already registered? <a href="/dashboard/login">Log in</a></span></div>
</form>
</div>`,
  );
}

export function loginPage(options: AuthFormOptions): string {
  const signupOpen = options.signupOpen ?? true;
  return page(
    { title: 'Log in', narrow: true, message: options.message, signupOpen },
    html`<h1>Log in</h1>
<div class="card">
<form method="post" action="/dashboard/login" id="login-form">
${csrfField(options.csrf)}
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${options.email ?? ''}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="${PASSWORD_MAX_LENGTH}">
<div class="actions"><button type="submit">Log in</button>${signupOpen ? html`<span class="small">No account yet? <a href="/dashboard/signup">Sign up</a></span>` : ''}</div>
</form>
</div>`,
  );
}

/** A 429: `reason` says which count is full (failed attempts, or sign-ups from the address). */
export function tooManyAttemptsPage(retryAfterSeconds: number, reason = 'Too many failed attempts.', signupOpen = true): string {
  const minutes = Math.ceil(retryAfterSeconds / 60);
  return page(
    { title: 'Too many attempts', narrow: true, signupOpen },
    html`<h1>Too many attempts</h1>
<div class="error" role="alert" data-testid="message">${reason} Wait ${minutes} minute${minutes === 1 ? '' : 's'} and try again.</div>
<p><a href="/dashboard/login">Back to the login page</a></p>`,
  );
}

/** BGONE_SIGNUP=false: the sign-up page and form answer this (403). */
export function signupClosedPage(): string {
  return page(
    { title: 'Sign-up is closed', narrow: true, signupOpen: false },
    html`<h1>Sign-up is closed</h1>
<div class="error" role="alert" data-testid="message">This service does not take new sign-ups. Ask its operator for access.</div>
<p><a href="/dashboard/login">Log in</a> with an existing account.</p>`,
  );
}
