/**
 * Sign-up, login and logout: GET and POST /dashboard/signup and /dashboard/login, POST
 * /dashboard/logout. Before login, forms carry a double-submit CSRF token (a pre-login cookie);
 * with sign-up switched off (BGONE_SIGNUP=false), both signup routes answer 403 and create nothing.
 */

import type { AuthFailure, AuthService } from '../auth.js';
import { SESSION_COOKIE, serializeCookie } from '../cookies.js';
import { CSRF_FIELD, PRE_LOGIN_COOKIE, type PreLoginCsrf } from '../csrf.js';
import { parseForm } from '../forms.js';
import { htmlReply, type Reply, redirect } from '../replies.js';
import type { PageRequest } from '../request.js';
import { loginPage, signupClosedPage, signupPage, tooManyAttemptsPage } from '../views/auth.js';
import type { Message } from '../views/layout.js';
import { welcomePage } from '../views/welcome.js';
import { type DashboardKit, FORM_EXPIRED } from './kit.js';

const PRE_LOGIN_COOKIE_SECONDS = 2 * 60 * 60;

export interface AuthPagesDeps {
  auth: AuthService;
  preLogin: PreLoginCsrf;
  signupOpen: boolean;
}

export function mountAuth(kit: DashboardKit, { auth, preLogin, signupOpen }: AuthPagesDeps): void {
  const { store, sessions, logger, currentSession } = kit;

  /** The pre-login CSRF token for a form page, and the cookie to set when the browser had none. */
  async function preLoginToken(pr: PageRequest): Promise<{ token: string; cookies: string[] }> {
    const issued = await preLogin.issue(pr.cookies.get(PRE_LOGIN_COOKIE));
    const cookies = issued.fresh ? [serializeCookie(PRE_LOGIN_COOKIE, issued.nonce, { secure: pr.secure, maxAgeSeconds: PRE_LOGIN_COOKIE_SECONDS })] : [];
    return { token: issued.token, cookies };
  }

  /** Reads a pre-login form and checks its double-submit token. */
  async function preLoginForm(pr: PageRequest): Promise<{ form: Map<string, string>; valid: boolean }> {
    const form = parseForm(pr.ex.req.header('content-type'), await kit.formBody(pr), [CSRF_FIELD, 'email', 'password']);
    return { form, valid: await preLogin.verify(pr.cookies.get(PRE_LOGIN_COOKIE), form.get(CSRF_FIELD)) };
  }

  async function startSession(pr: PageRequest, accountId: number) {
    await store.sessions.delete(pr.cookies.get(SESSION_COOKIE)); // a previous session of this browser ends
    const { session, cookie } = await sessions.start(accountId, pr.secure);
    const clearPreLogin = serializeCookie(PRE_LOGIN_COOKIE, '', { secure: pr.secure, maxAgeSeconds: 0 });
    return { session, cookies: [cookie, clearPreLogin] };
  }

  /** The answer to a refused sign-up or login: a 429 page, or the form again with the reason. */
  function authFailure(failure: AuthFailure, form: (message: Message) => string, cookies: string[]): Reply {
    const retryAfter = failure.retryAfterSeconds ?? 60;
    if (failure.status === 429) {
      return htmlReply(429, tooManyAttemptsPage(retryAfter, failure.message, signupOpen), undefined, { 'Retry-After': String(retryAfter) });
    }
    // 503: the password work is at its bound; the form is shown again for a retry in a moment.
    const headers: Record<string, string> = failure.status === 503 ? { 'Retry-After': String(retryAfter) } : {};
    return htmlReply(failure.status, form({ kind: 'error', text: failure.message }), cookies, headers);
  }

  const signupClosed = (): Reply => htmlReply(403, signupClosedPage());

  kit.route('GET', '/dashboard/signup', async (pr) => {
    if (!signupOpen) return signupClosed();
    if (await currentSession(pr)) return redirect('/dashboard');
    const { token, cookies } = await preLoginToken(pr);
    return htmlReply(200, signupPage({ csrf: token }), cookies);
  });

  kit.route('POST', '/dashboard/signup', async (pr) => {
    if (!signupOpen) return signupClosed(); // before the body: nothing of it is needed
    const { form, valid } = await preLoginForm(pr);
    const email = form.get('email') ?? '';
    const { token, cookies } = await preLoginToken(pr);
    if (!valid) return htmlReply(403, signupPage({ csrf: token, email, message: { kind: 'error', text: FORM_EXPIRED } }), cookies);
    const result = await auth.signUp(email, form.get('password') ?? '', pr.ip);
    if (!result.ok) return authFailure(result, (message) => signupPage({ csrf: token, email, message }), cookies);
    const started = await startSession(pr, result.account.id);
    logger?.info({ requestId: pr.ex.requestId, accountId: result.account.id }, 'dashboard sign-up');
    const origin = `${pr.secure ? 'https' : 'http'}://${pr.host || 'localhost'}`;
    return htmlReply(200, welcomePage({ viewer: { email: result.account.email, csrf: started.session.csrfToken }, key: result.key, origin }), started.cookies);
  });

  kit.route('GET', '/dashboard/login', async (pr) => {
    if (await currentSession(pr)) return redirect('/dashboard');
    const { token, cookies } = await preLoginToken(pr);
    return htmlReply(200, loginPage({ csrf: token, message: kit.noticeOf(pr), signupOpen }), cookies);
  });

  kit.route('POST', '/dashboard/login', async (pr) => {
    const { form, valid } = await preLoginForm(pr);
    const email = form.get('email') ?? '';
    const { token, cookies } = await preLoginToken(pr);
    if (!valid) return htmlReply(403, loginPage({ csrf: token, email, message: { kind: 'error', text: FORM_EXPIRED }, signupOpen }), cookies);
    const result = await auth.logIn(email, form.get('password') ?? '', pr.ip);
    if (!result.ok) return authFailure(result, (message) => loginPage({ csrf: token, email, message, signupOpen }), cookies);
    return redirect('/dashboard', (await startSession(pr, result.account.id)).cookies);
  });

  kit.action('/dashboard/logout', [], async (pr) =>
    redirect('/dashboard/login?done=logged-out', [await sessions.end(pr.cookies.get(SESSION_COOKIE), pr.secure)]),
  );
}
