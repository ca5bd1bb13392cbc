/**
 * The dashboard's routes on the service's uWebSockets.js app, under /dashboard:
 *
 *   GET  /dashboard                  usage (credits, cycle, rate limit, chart)
 *   GET  /dashboard/signup, /login   forms;  POST the same paths to sign up / log in
 *   POST /dashboard/logout
 *   GET  /dashboard/keys             list;   POST /dashboard/keys (create), /dashboard/keys/revoke
 *   GET  /dashboard/plan             plans;  POST /dashboard/plan/cancel, /resume, /change
 *   GET  /dashboard/try              panel;  POST /dashboard/try (multipart, session + X-CSRF-Token)
 *   GET  /dashboard/assets/*         the stylesheet and the script
 *
 * All state lives in the store (accounts, keys, credits, plans, sessions); pages are rendered on the
 * server from it. Every POST form carries a CSRF token; every page is no-store with a strict CSP.
 */
import type uWS from 'uWebSockets.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../server/metrics.js';
import { RateLimiter } from '../server/rate-limit.js';
import { isPlanName, StoreError, type Store } from '../store/index.js';
import { CSS, CSS_PATH, JS, JS_PATH } from './assets.js';
import { AuthService } from './auth.js';
import { type BillingProvider, checkCheckoutUrl, cliPlanCommand } from './billing.js';
import { PLAN_OFFERS } from './catalog.js';
import { serializeCookie, SESSION_COOKIE } from './cookies.js';
import { checkSessionToken, CSRF_FIELD, PRE_LOGIN_COOKIE, PreLoginCsrf } from './csrf.js';
import { FormError, MAX_FORM_BYTES, parseForm } from './forms.js';
import { Exchange, htmlReply, readRequest, redirect, type Reply } from './http.js';
import { DEFAULT_LOGIN_LIMITS, LoginLimiter, type LoginLimits } from './login-limiter.js';
import type { ScryptParams } from './passwords.js';
import { SessionManager, type SignedIn } from './sessions.js';
import { TryEndpoint } from './try-endpoint.js';
import { loginPage, signupPage, tooManyAttemptsPage } from './views/auth.js';
import { errorPage } from './views/errors.js';
import { keysPage } from './views/keys.js';
import type { Message, Viewer } from './views/layout.js';
import { planPage } from './views/plan.js';
import { tryPage } from './views/try.js';
import { usagePage } from './views/usage.js';
import { welcomePage } from './views/welcome.js';

export interface DashboardDeps {
  store: Store;
  metrics?: Metrics;
  logger?: Logger;
  /** The model of the try-it panel (default: the manifest's default, as the API). */
  model?: string | undefined;
  /** Checkout for plan changes; none: the plan page shows the operator's CLI command. */
  billing?: BillingProvider | null;
  /** Believe X-Forwarded-Proto / X-Forwarded-For (BGONE_TRUST_PROXY=true). Default false. */
  trustProxy?: boolean;
  /** Session lifetime (default 12 h, fixed from login). */
  sessionTtlMs?: number;
  loginLimits?: LoginLimits;
  /** scrypt cost (default N=2^15, r=8, p=1). */
  scrypt?: ScryptParams;
  /** Try-it requests processed at once (default 2). */
  tryMaxInFlight?: number;
  /** Seconds in Retry-After of a 503 (default 5). */
  overloadRetryAfter?: number;
}

const PRE_LOGIN_COOKIE_SECONDS = 2 * 60 * 60;

/** Outcome messages after a redirect (?done=...): fixed texts, nothing from the URL is echoed. */
const NOTICES: Record<string, Message> = {
  'key-revoked': { kind: 'notice', text: 'The key was revoked: requests with it are refused from now on.' },
  'plan-cancelled': { kind: 'notice', text: 'Your plan is cancelled. It stays in effect until the end of the billing cycle, then the account moves to Free.' },
  'plan-resumed': { kind: 'notice', text: 'Your plan is resumed: it continues after this cycle.' },
  'logged-out': { kind: 'notice', text: 'You are logged out.' },
  expired: { kind: 'notice', text: 'Your session has ended. Log in again.' },
};

const FORM_EXPIRED = 'This form has expired or did not come from this dashboard. Reload the page and try again.';

export function mountDashboard(app: uWS.TemplatedApp, deps: DashboardDeps): void {
  const { store, metrics, logger } = deps;
  const trustProxy = deps.trustProxy ?? false;
  const nowMs = () => store.clock().getTime();
  const sessions = new SessionManager(store, deps.sessionTtlMs);
  const preLogin = new PreLoginCsrf();
  const auth = new AuthService(store, new LoginLimiter(nowMs, deps.loginLimits ?? DEFAULT_LOGIN_LIMITS), deps.scrypt);
  const billing = deps.billing ?? null;
  const tryEndpoint = new TryEndpoint({
    store,
    model: deps.model,
    metrics,
    logger,
    rateLimiter: new RateLimiter(nowMs),
    maxInFlight: deps.tryMaxInFlight ?? 2,
    overloadRetryAfter: deps.overloadRetryAfter ?? 5,
  });

  type Handler = (ex: Exchange) => Reply | void | Promise<Reply | void>;
  const allowed = new Map<string, string[]>();

  function route(method: 'get' | 'post', path: string, handler: Handler): void {
    allowed.set(path, [...(allowed.get(path) ?? []), method.toUpperCase()]);
    app[method](path, (res, req) => {
      const ex = new Exchange(res, readRequest(res, req, trustProxy), path, metrics);
      let result: Reply | void | Promise<Reply | void>;
      try {
        result = handler(ex);
      } catch (err) {
        return failed(ex, err);
      }
      if (result instanceof Promise) result.then((reply) => reply && ex.send(reply), (err: unknown) => failed(ex, err));
      else if (result) ex.send(result);
    });
  }

  function failed(ex: Exchange, err: unknown): void {
    if (err instanceof FormError) {
      ex.send(htmlReply(err.status, errorPage('Bad request', err.message)), 'validation_error');
      return;
    }
    if (!ex.open) return;
    logger?.error({ requestId: ex.info.requestId, route: ex.route, err }, 'dashboard request failed');
    ex.send(htmlReply(500, errorPage('Something went wrong', `The request could not be completed. Reference: ${ex.info.requestId}.`)), 'internal_server_error');
  }

  const viewerOf = (signedIn: SignedIn): Viewer => ({ email: signedIn.account.email, csrf: signedIn.session.csrfToken });
  const noticeOf = (ex: Exchange): Message | null => NOTICES[ex.info.query.get('done') ?? ''] ?? null;
  /** Where to send a request without a live session: the login page, saying why when a cookie was there. */
  const toLogin = (ex: Exchange): Reply => redirect(ex.info.cookies.has(SESSION_COOKIE) ? '/dashboard/login?done=expired' : '/dashboard/login');

  /** A logged-in GET page. */
  function page(path: string, render: (ex: Exchange, signedIn: SignedIn) => Reply): void {
    route('get', path, (ex) => {
      const signedIn = sessions.current(ex.info);
      return signedIn ? render(ex, signedIn) : toLogin(ex);
    });
  }

  /** A logged-in POST form: session, body, then the session's CSRF token, before `act` runs. */
  function action(path: string, fields: readonly string[], act: (ex: Exchange, signedIn: SignedIn, form: Map<string, string>) => Reply | Promise<Reply>): void {
    route('post', path, async (ex) => {
      const signedIn = sessions.current(ex.info);
      if (!signedIn) return toLogin(ex);
      const form = parseForm(ex.info.contentType, await ex.readBody(MAX_FORM_BYTES), [CSRF_FIELD, ...fields]);
      if (!checkSessionToken(signedIn.session.csrfToken, form.get(CSRF_FIELD))) {
        return htmlReply(403, errorPage('Form expired', FORM_EXPIRED, viewerOf(signedIn)));
      }
      return act(ex, signedIn, form);
    });
  }

  /** The pre-login CSRF token for a form page, and the cookie to set when the browser had none. */
  function preLoginToken(ex: Exchange): { token: string; cookies: string[] } {
    const issued = preLogin.issue(ex.info.cookies.get(PRE_LOGIN_COOKIE));
    const cookies = issued.fresh ? [serializeCookie(PRE_LOGIN_COOKIE, issued.nonce, { secure: ex.info.secure, maxAgeSeconds: PRE_LOGIN_COOKIE_SECONDS })] : [];
    return { token: issued.token, cookies };
  }

  /** Reads a pre-login form and checks its double-submit token. */
  async function preLoginForm(ex: Exchange): Promise<{ form: Map<string, string>; valid: boolean }> {
    const form = parseForm(ex.info.contentType, await ex.readBody(MAX_FORM_BYTES), [CSRF_FIELD, 'email', 'password']);
    return { form, valid: preLogin.verify(ex.info.cookies.get(PRE_LOGIN_COOKIE), form.get(CSRF_FIELD)) };
  }

  function startSession(ex: Exchange, accountId: number) {
    sessions.sessions.delete(ex.info.cookies.get(SESSION_COOKIE)); // a previous session of this browser ends
    const { session, cookie } = sessions.start(accountId, ex.info.secure);
    const clearPreLogin = serializeCookie(PRE_LOGIN_COOKIE, '', { secure: ex.info.secure, maxAgeSeconds: 0 });
    return { session, cookies: [cookie, clearPreLogin] };
  }

  function tooMany(retryAfterSeconds: number): Reply {
    return htmlReply(429, tooManyAttemptsPage(retryAfterSeconds), undefined, { 'Retry-After': String(retryAfterSeconds) });
  }

  // --- Pages -------------------------------------------------------------------------------------

  page('/dashboard', (ex, signedIn) => {
    const balance = store.credits.balance(signedIn.account.id);
    const days = store.usage.byDay(signedIn.account.id);
    return htmlReply(200, usagePage({ viewer: viewerOf(signedIn), account: signedIn.account, balance, days, now: store.clock(), message: noticeOf(ex) }));
  });
  route('get', '/dashboard/', () => redirect('/dashboard'));

  // --- Sign-up, login, logout ---------------------------------------------------------------------

  route('get', '/dashboard/signup', (ex) => {
    if (sessions.current(ex.info)) return redirect('/dashboard');
    const { token, cookies } = preLoginToken(ex);
    return htmlReply(200, signupPage({ csrf: token }), cookies);
  });

  route('post', '/dashboard/signup', async (ex) => {
    const { form, valid } = await preLoginForm(ex);
    const email = form.get('email') ?? '';
    const { token, cookies } = preLoginToken(ex);
    if (!valid) return htmlReply(403, signupPage({ csrf: token, email, message: { kind: 'error', text: FORM_EXPIRED } }), cookies);
    const result = await auth.signUp(email, form.get('password') ?? '', ex.info.ip);
    if (!result.ok) {
      if (result.status === 429) return tooMany(result.retryAfterSeconds ?? 60);
      return htmlReply(result.status, signupPage({ csrf: token, email, message: { kind: 'error', text: result.message } }), cookies);
    }
    const started = startSession(ex, result.account.id);
    logger?.info({ requestId: ex.info.requestId, accountId: result.account.id }, 'dashboard sign-up');
    const origin = `${ex.info.secure ? 'https' : 'http'}://${ex.info.host || 'localhost'}`;
    return htmlReply(200, welcomePage({ viewer: { email: result.account.email, csrf: started.session.csrfToken }, key: result.key, origin }), started.cookies);
  });

  route('get', '/dashboard/login', (ex) => {
    if (sessions.current(ex.info)) return redirect('/dashboard');
    const { token, cookies } = preLoginToken(ex);
    return htmlReply(200, loginPage({ csrf: token, message: noticeOf(ex) }), cookies);
  });

  route('post', '/dashboard/login', async (ex) => {
    const { form, valid } = await preLoginForm(ex);
    const email = form.get('email') ?? '';
    const { token, cookies } = preLoginToken(ex);
    if (!valid) return htmlReply(403, loginPage({ csrf: token, email, message: { kind: 'error', text: FORM_EXPIRED } }), cookies);
    const result = await auth.logIn(email, form.get('password') ?? '', ex.info.ip);
    if (!result.ok) {
      if (result.status === 429) return tooMany(result.retryAfterSeconds ?? 60);
      return htmlReply(result.status, loginPage({ csrf: token, email, message: { kind: 'error', text: result.message } }), cookies);
    }
    return redirect('/dashboard', startSession(ex, result.account.id).cookies);
  });

  action('/dashboard/logout', [], (ex) => redirect('/dashboard/login?done=logged-out', [sessions.end(ex.info)]));

  // --- API keys -----------------------------------------------------------------------------------

  page('/dashboard/keys', (ex, signedIn) =>
    htmlReply(200, keysPage({ viewer: viewerOf(signedIn), keys: store.keys.list(signedIn.account.id), message: noticeOf(ex) })),
  );

  action('/dashboard/keys', [], (_ex, signedIn) => {
    const { key } = store.keys.create(signedIn.account.id);
    return htmlReply(200, keysPage({ viewer: viewerOf(signedIn), keys: store.keys.list(signedIn.account.id), newKey: key }));
  });

  action('/dashboard/keys/revoke', ['key_id'], (_ex, signedIn, form) => {
    const id = Number(form.get('key_id'));
    const revoked = Number.isSafeInteger(id) && id > 0 ? store.keys.revoke(id, { accountId: signedIn.account.id }) : null;
    if (!revoked) {
      return htmlReply(404, keysPage({ viewer: viewerOf(signedIn), keys: store.keys.list(signedIn.account.id), message: { kind: 'error', text: 'No such key on this account.' } }));
    }
    return redirect('/dashboard/keys?done=key-revoked');
  });

  // --- Plan ---------------------------------------------------------------------------------------

  function renderPlan(status: number, signedIn: SignedIn, message: Message | null): Reply {
    const balance = store.credits.balance(signedIn.account.id);
    const account = store.accounts.get(signedIn.account.id)!;
    return htmlReply(status, planPage({ viewer: viewerOf(signedIn), account, plans: store.plans, cycleEnd: balance.cycleEnd, now: store.clock(), billingConfigured: billing !== null, message }));
  }

  page('/dashboard/plan', (ex, signedIn) => renderPlan(200, signedIn, noticeOf(ex)));

  action('/dashboard/plan/cancel', [], (_ex, signedIn) => {
    try {
      store.accounts.cancel(signedIn.account.id);
    } catch (err) {
      if (err instanceof StoreError && err.code === 'invalid_state') return renderPlan(400, signedIn, { kind: 'error', text: 'The Free plan cannot be cancelled.' });
      throw err;
    }
    return redirect('/dashboard/plan?done=plan-cancelled');
  });

  action('/dashboard/plan/resume', [], (_ex, signedIn) => {
    try {
      store.accounts.resume(signedIn.account.id);
    } catch (err) {
      if (err instanceof StoreError && err.code === 'invalid_state') {
        return renderPlan(400, signedIn, { kind: 'error', text: 'The cancellation already took effect at the end of the cycle; choose a plan again.' });
      }
      throw err;
    }
    return redirect('/dashboard/plan?done=plan-resumed');
  });

  action('/dashboard/plan/change', ['plan'], async (_ex, signedIn, form) => {
    const plan = form.get('plan');
    if (!isPlanName(plan)) return renderPlan(400, signedIn, { kind: 'error', text: 'Unknown plan.' });
    if (plan === signedIn.account.plan) return renderPlan(400, signedIn, { kind: 'error', text: `You are already on ${PLAN_OFFERS[plan].title}.` });
    if (!billing) {
      return renderPlan(400, signedIn, {
        kind: 'error',
        text: `No billing provider is configured: an operator changes the plan with "${cliPlanCommand(signedIn.account.email, plan)}".`,
      });
    }
    let url: string;
    try {
      url = checkCheckoutUrl(await billing.checkoutUrl(signedIn.account, plan));
    } catch (err) {
      logger?.error({ err, accountId: signedIn.account.id }, 'billing provider failed');
      return renderPlan(502, signedIn, { kind: 'error', text: 'The billing provider could not start the checkout. Try again later.' });
    }
    return redirect(url);
  });

  // --- Try it -------------------------------------------------------------------------------------

  page('/dashboard/try', (_ex, signedIn) => htmlReply(200, tryPage({ viewer: viewerOf(signedIn), balance: store.credits.balance(signedIn.account.id) })));

  allowed.set('/dashboard/try', [...(allowed.get('/dashboard/try') ?? []), 'POST']);
  app.post('/dashboard/try', (res, req) => {
    const ex = new Exchange(res, readRequest(res, req, trustProxy), '/dashboard/try', metrics);
    try {
      tryEndpoint.handle(ex, sessions.current(ex.info));
    } catch (err) {
      failed(ex, err);
    }
  });

  // --- Assets, wrong methods, unknown paths -------------------------------------------------------

  for (const [path, body, type] of [
    [CSS_PATH, CSS, 'text/css; charset=utf-8'],
    [JS_PATH, JS, 'text/javascript; charset=utf-8'],
  ] as const) {
    route('get', path, () => ({ status: 200, headers: { 'Content-Type': type, 'Cache-Control': 'public, max-age=31536000, immutable', 'X-Content-Type-Options': 'nosniff' }, body }));
  }

  for (const [path, methods] of allowed) {
    app.any(path, (res, req) => {
      const ex = new Exchange(res, readRequest(res, req, trustProxy), path, metrics);
      ex.send(htmlReply(405, errorPage('Method not allowed', `Use ${methods.join(' or ')} on this address.`), undefined, { Allow: methods.join(', ') }), 'method_not_allowed');
    });
  }
  app.any('/dashboard/*', (res, req) => {
    const ex = new Exchange(res, readRequest(res, req, trustProxy), '/dashboard/*', metrics);
    ex.send(htmlReply(404, errorPage('Not found', 'There is no such page in the dashboard.')), 'not_found');
  });
}
