/**
 * The dashboard's routes on the service's router (any HTTP backend), under /dashboard:
 *
 *   GET  /dashboard                  usage (credits, cycle, rate limit, chart)
 *   GET  /dashboard/signup, /login   forms;  POST the same paths to sign up / log in
 *   POST /dashboard/logout
 *   GET  /dashboard/keys             list;   POST /dashboard/keys (create), /dashboard/keys/revoke
 *   GET  /dashboard/webhooks         endpoints and their deliveries;
 *                                    POST /dashboard/webhooks (create), /dashboard/webhooks/delete, /test
 *   GET  /dashboard/plan             plans;  POST /dashboard/plan/cancel, /resume, /change
 *   GET  /dashboard/try              panel;  POST /dashboard/try (multipart, session + X-CSRF-Token)
 *   GET  /dashboard/assets/*         the stylesheet and the script
 *
 * All state lives in the store (accounts, keys, credits, plans, sessions); pages are rendered on the
 * server from it. Every POST form carries a CSRF token; every page is no-store with a strict CSP.
 *
 * With sign-up switched off (BGONE_SIGNUP=false), GET and POST /dashboard/signup answer 403 with a
 * page saying so, and create nothing.
 */
import type { ServiceContext } from '../api/server.js';
import type { Logger } from '../config/logger.js';
import { BodyTooLargeError, ClientGoneError, type Exchange } from '../http/exchange.js';
import type { FallbackAnswers } from '../http/router.js';
import { accountRateKey } from '../service/admission.js';
import { HttpError } from '../service/errors.js';
import { rateLimitHeaders } from '../service/rate-limit.js';
import { DEFAULT_LOGIN_LIMITS, isPlanName, type LoginLimits, type Store, StoreError } from '../store/index.js';
import { MAX_WEBHOOK_URL_LENGTH } from '../webhooks/address-guard.js';
import { createWebhookEndpoint, MAX_DESCRIPTION_LENGTH, MAX_WEBHOOK_ENDPOINTS } from '../webhooks/endpoints.js';
import { CSS, CSS_PATH, JS, JS_PATH } from './assets.js';
import { type AuthFailure, AuthService, DEFAULT_SIGNUPS_PER_IP_PER_HOUR } from './auth.js';
import { type BillingProvider, checkCheckoutUrl, cliPlanCommand } from './billing.js';
import { PLAN_OFFERS } from './catalog.js';
import { SESSION_COOKIE, serializeCookie } from './cookies.js';
import { CSRF_FIELD, checkSessionToken, PRE_LOGIN_COOKIE, PreLoginCsrf } from './csrf.js';
import { FormError, MAX_FORM_BYTES, parseForm } from './forms.js';
import { PasswordHasher, type PasswordWorkLimits, type ScryptParams } from './passwords.js';
import { htmlReply, type Reply, redirect, sendReply } from './replies.js';
import { type PageRequest, pageRequest } from './request.js';
import { SessionManager, type SignedIn } from './sessions.js';
import { TryEndpoint } from './try-endpoint.js';
import { loginPage, signupClosedPage, signupPage, tooManyAttemptsPage } from './views/auth.js';
import { errorPage } from './views/errors.js';
import { keysPage } from './views/keys.js';
import type { Message, Viewer } from './views/layout.js';
import { checkoutPage, planPage } from './views/plan.js';
import { tryPage } from './views/try.js';
import { usagePage } from './views/usage.js';
import { type WebhooksPageOptions, webhooksPage } from './views/webhooks.js';
import { welcomePage } from './views/welcome.js';

export interface DashboardDeps {
  store: Store;
  logger?: Logger | undefined;
  /** The model of the try-it panel (default: the manifest's default, as the API). */
  model?: string | undefined;
  /** Checkout for plan changes; none: the plan page shows the operator's CLI command. */
  billing?: BillingProvider | null;
  /** Believe X-Forwarded-Proto / X-Forwarded-For (BGONE_TRUST_PROXY=true). Default false. */
  trustProxy?: boolean;
  loginLimits?: LoginLimits;
  /** scrypt cost (default N=2^15, r=8, p=1). */
  scrypt?: ScryptParams;
  /** Bounds on concurrent scrypt work (default: 1 at a time, 8 waiting, then a 503 page). */
  passwordWork?: Partial<PasswordWorkLimits>;
  /** The hasher itself (then `scrypt` and `passwordWork` are its own): tests watch its work. */
  passwordHasher?: PasswordHasher;
  /** BGONE_SIGNUP: false closes sign-up (a 403 page, nothing created). Default true. */
  signup?: boolean;
  /** BGONE_SIGNUP_PER_IP_PER_HOUR: sign-ups per client address per hour, successful ones included. Default 5. */
  signupsPerIpPerHour?: number;
  /** BGONE_WEBHOOK_ALLOW_PRIVATE: accept http:// and private-address webhook URLs. Default false. */
  webhookAllowPrivate?: boolean;
  /** Called once a test event is in the outbox, so that the delivery worker can look at once. */
  onWebhookTest?: () => void;
}

/** Deliveries shown under each webhook endpoint. */
const RECENT_DELIVERIES = 10;

const PRE_LOGIN_COOKIE_SECONDS = 2 * 60 * 60;

/** Outcome messages after a redirect (?done=...): fixed texts, nothing from the URL is echoed. */
const NOTICES: Record<string, Message> = {
  'key-revoked': { kind: 'notice', text: 'The key was revoked: requests with it are refused from now on.' },
  'webhook-deleted': { kind: 'notice', text: 'The endpoint was deleted, with its pending deliveries: no more events are sent to it.' },
  'webhook-test-sent': { kind: 'notice', text: 'A webhook.test event is queued; its delivery is listed under the endpoint. Reload to follow it.' },
  'plan-cancelled': { kind: 'notice', text: 'Your plan is cancelled. It stays in effect until the end of the billing cycle, then the account moves to Free.' },
  'plan-resumed': { kind: 'notice', text: 'Your plan is resumed: it continues after this cycle.' },
  'logged-out': { kind: 'notice', text: 'You are logged out.' },
  expired: { kind: 'notice', text: 'Your session has ended. Log in again.' },
};

const FORM_EXPIRED = 'This form has expired or did not come from this dashboard. Reload the page and try again.';

export function mountDashboard(context: ServiceContext, deps: DashboardDeps): void {
  const { router, admission, metrics } = context;
  const { store, logger } = deps;
  const trustProxy = deps.trustProxy ?? false;
  const sessions = new SessionManager(store);
  const preLogin = new PreLoginCsrf();
  const hasher = deps.passwordHasher ?? new PasswordHasher(deps.scrypt, deps.passwordWork);
  const auth = new AuthService(store, deps.loginLimits ?? DEFAULT_LOGIN_LIMITS, hasher, deps.signupsPerIpPerHour ?? DEFAULT_SIGNUPS_PER_IP_PER_HOUR);
  const signupOpen = deps.signup ?? true;
  const billing = deps.billing ?? null;
  const tryEndpoint = new TryEndpoint({ store, model: deps.model, metrics, logger, admission, memory: context.memory });

  /** Unknown dashboard paths, wrong methods and failures answer with HTML pages, not the API's JSON. */
  const pages: FallbackAnswers = {
    notFound: (ex) => sendReply(ex, htmlReply(404, errorPage('Not found', 'There is no such page in the dashboard.')), 'not_found'),
    methodNotAllowed: (ex, methods) =>
      sendReply(
        ex,
        htmlReply(405, errorPage('Method not allowed', `Use ${methods.join(' or ')} on this address.`), undefined, { Allow: methods.join(', ') }),
        'method_not_allowed',
      ),
    failed: (ex, err) => {
      if (err instanceof FormError) return sendReply(ex, htmlReply(err.status, errorPage('Bad request', err.message)), 'validation_error');
      sendReply(
        ex,
        htmlReply(500, errorPage('Something went wrong', `The request could not be completed. Reference: ${ex.requestId}.`)),
        'internal_server_error',
      );
    },
  };
  router.group('/dashboard/', pages);

  type Handler = (pr: PageRequest) => Reply | undefined | Promise<Reply | undefined>;

  function route(method: 'GET' | 'POST', path: string, handler: Handler): void {
    router.add(
      method,
      path,
      async (ex: Exchange) => {
        let reply: Reply | undefined;
        try {
          reply = await handler(pageRequest(ex, trustProxy));
        } catch (err) {
          if (err instanceof ClientGoneError) return; // nobody to answer
          if (err instanceof FormError) return pages.failed?.(ex, err);
          throw err; // the router logs it and answers with pages.failed
        }
        if (reply) sendReply(ex, reply);
      },
      pages,
    );
  }

  /** The form body of a POST, at most MAX_FORM_BYTES. */
  async function formBody(pr: PageRequest): Promise<Buffer> {
    try {
      return await pr.ex.readBody(MAX_FORM_BYTES);
    } catch (err) {
      if (err instanceof BodyTooLargeError) throw new FormError('The form is too large.', 413);
      throw err;
    }
  }

  const currentSession = (pr: PageRequest) => sessions.current(pr.cookies.get(SESSION_COOKIE));

  const viewerOf = (signedIn: SignedIn): Viewer => ({ email: signedIn.account.email, csrf: signedIn.session.csrfToken });
  const noticeOf = (pr: PageRequest): Message | null => NOTICES[pr.query.get('done') ?? ''] ?? null;
  /** Where to send a request without a live session: the login page, saying why when a cookie was there. */
  const toLogin = (pr: PageRequest): Reply => redirect(pr.cookies.has(SESSION_COOKIE) ? '/dashboard/login?done=expired' : '/dashboard/login');

  /** A logged-in GET page. */
  function page(path: string, render: (pr: PageRequest, signedIn: SignedIn) => Reply | Promise<Reply>): void {
    route('GET', path, async (pr) => {
      const signedIn = await currentSession(pr);
      return signedIn ? render(pr, signedIn) : toLogin(pr);
    });
  }

  /** A logged-in POST form: session, body, then the session's CSRF token, before `act` runs. */
  function action(
    path: string,
    fields: readonly string[],
    act: (pr: PageRequest, signedIn: SignedIn, form: Map<string, string>) => Reply | Promise<Reply>,
  ): void {
    route('POST', path, async (pr) => {
      const signedIn = await currentSession(pr);
      if (!signedIn) return toLogin(pr);
      const form = parseForm(pr.ex.req.header('content-type'), await formBody(pr), [CSRF_FIELD, ...fields]);
      if (!checkSessionToken(signedIn.session.csrfToken, form.get(CSRF_FIELD))) {
        return htmlReply(403, errorPage('Form expired', FORM_EXPIRED, viewerOf(signedIn)));
      }
      return act(pr, signedIn, form);
    });
  }

  /** The pre-login CSRF token for a form page, and the cookie to set when the browser had none. */
  function preLoginToken(pr: PageRequest): { token: string; cookies: string[] } {
    const issued = preLogin.issue(pr.cookies.get(PRE_LOGIN_COOKIE));
    const cookies = issued.fresh ? [serializeCookie(PRE_LOGIN_COOKIE, issued.nonce, { secure: pr.secure, maxAgeSeconds: PRE_LOGIN_COOKIE_SECONDS })] : [];
    return { token: issued.token, cookies };
  }

  /** Reads a pre-login form and checks its double-submit token. */
  async function preLoginForm(pr: PageRequest): Promise<{ form: Map<string, string>; valid: boolean }> {
    const form = parseForm(pr.ex.req.header('content-type'), await formBody(pr), [CSRF_FIELD, 'email', 'password']);
    return { form, valid: preLogin.verify(pr.cookies.get(PRE_LOGIN_COOKIE), form.get(CSRF_FIELD)) };
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

  // --- Pages -------------------------------------------------------------------------------------

  page('/dashboard', async (pr, signedIn) => {
    const balance = await store.credits.balance(signedIn.account.id);
    const days = await store.usage.byDay(signedIn.account.id);
    return htmlReply(200, usagePage({ viewer: viewerOf(signedIn), account: signedIn.account, balance, days, now: store.clock(), message: noticeOf(pr) }));
  });
  route('GET', '/dashboard/', () => redirect('/dashboard'));

  // --- Sign-up, login, logout ---------------------------------------------------------------------

  route('GET', '/dashboard/signup', async (pr) => {
    if (!signupOpen) return signupClosed();
    if (await currentSession(pr)) return redirect('/dashboard');
    const { token, cookies } = preLoginToken(pr);
    return htmlReply(200, signupPage({ csrf: token }), cookies);
  });

  route('POST', '/dashboard/signup', async (pr) => {
    if (!signupOpen) return signupClosed(); // before the body: nothing of it is needed
    const { form, valid } = await preLoginForm(pr);
    const email = form.get('email') ?? '';
    const { token, cookies } = preLoginToken(pr);
    if (!valid) return htmlReply(403, signupPage({ csrf: token, email, message: { kind: 'error', text: FORM_EXPIRED } }), cookies);
    const result = await auth.signUp(email, form.get('password') ?? '', pr.ip);
    if (!result.ok) return authFailure(result, (message) => signupPage({ csrf: token, email, message }), cookies);
    const started = await startSession(pr, result.account.id);
    logger?.info({ requestId: pr.ex.requestId, accountId: result.account.id }, 'dashboard sign-up');
    const origin = `${pr.secure ? 'https' : 'http'}://${pr.host || 'localhost'}`;
    return htmlReply(200, welcomePage({ viewer: { email: result.account.email, csrf: started.session.csrfToken }, key: result.key, origin }), started.cookies);
  });

  route('GET', '/dashboard/login', async (pr) => {
    if (await currentSession(pr)) return redirect('/dashboard');
    const { token, cookies } = preLoginToken(pr);
    return htmlReply(200, loginPage({ csrf: token, message: noticeOf(pr), signupOpen }), cookies);
  });

  route('POST', '/dashboard/login', async (pr) => {
    const { form, valid } = await preLoginForm(pr);
    const email = form.get('email') ?? '';
    const { token, cookies } = preLoginToken(pr);
    if (!valid) return htmlReply(403, loginPage({ csrf: token, email, message: { kind: 'error', text: FORM_EXPIRED }, signupOpen }), cookies);
    const result = await auth.logIn(email, form.get('password') ?? '', pr.ip);
    if (!result.ok) return authFailure(result, (message) => loginPage({ csrf: token, email, message, signupOpen }), cookies);
    return redirect('/dashboard', (await startSession(pr, result.account.id)).cookies);
  });

  action('/dashboard/logout', [], async (pr) => redirect('/dashboard/login?done=logged-out', [await sessions.end(pr.cookies.get(SESSION_COOKIE), pr.secure)]));

  // --- API keys -----------------------------------------------------------------------------------

  page('/dashboard/keys', async (pr, signedIn) =>
    htmlReply(200, keysPage({ viewer: viewerOf(signedIn), keys: await store.keys.list(signedIn.account.id), message: noticeOf(pr) })),
  );

  action('/dashboard/keys', [], async (_pr, signedIn) => {
    let created: { key: string };
    try {
      created = await store.keys.create(signedIn.account.id);
    } catch (err) {
      if (!(err instanceof StoreError) || err.code !== 'key_limit') throw err;
      const keys = await store.keys.list(signedIn.account.id);
      const active = keys.filter((k) => !k.revoked).length;
      const text = `This account already has ${active} active API keys, the most it may have. Revoke one you no longer use, then create a new one.`;
      return htmlReply(409, keysPage({ viewer: viewerOf(signedIn), keys, message: { kind: 'error', text } }));
    }
    return htmlReply(200, keysPage({ viewer: viewerOf(signedIn), keys: await store.keys.list(signedIn.account.id), newKey: created.key }));
  });

  action('/dashboard/keys/revoke', ['key_id'], async (_pr, signedIn, form) => {
    const id = Number(form.get('key_id'));
    const revoked = Number.isSafeInteger(id) && id > 0 ? await store.keys.revoke(id, { accountId: signedIn.account.id }) : null;
    if (!revoked) {
      const keys = await store.keys.list(signedIn.account.id);
      return htmlReply(404, keysPage({ viewer: viewerOf(signedIn), keys, message: { kind: 'error', text: 'No such key on this account.' } }));
    }
    return redirect('/dashboard/keys?done=key-revoked');
  });

  // --- Webhooks -----------------------------------------------------------------------------------

  const webhookAllowPrivate = deps.webhookAllowPrivate ?? false;

  async function renderWebhooks(status: number, signedIn: SignedIn, extra: Pick<WebhooksPageOptions, 'created' | 'form' | 'message'> = {}): Promise<Reply> {
    const accountId = signedIn.account.id;
    const endpoints = await store.webhooks.list(accountId);
    const withDeliveries = await Promise.all(
      endpoints.map(async (endpoint) => ({ endpoint, deliveries: await store.webhooks.deliveries(accountId, endpoint.id, RECENT_DELIVERIES) })),
    );
    return htmlReply(
      status,
      webhooksPage({
        viewer: viewerOf(signedIn),
        endpoints: withDeliveries,
        maxEndpoints: MAX_WEBHOOK_ENDPOINTS,
        maxUrlLength: MAX_WEBHOOK_URL_LENGTH,
        maxDescriptionLength: MAX_DESCRIPTION_LENGTH,
        allowPrivate: webhookAllowPrivate,
        ...extra,
      }),
    );
  }

  /** The endpoint a delete or test form names, or null for a missing or absurd one (the store then has nothing to find). */
  function endpointIdOf(form: Map<string, string>): string | null {
    const id = form.get('endpoint_id');
    return id !== undefined && id.length > 0 && id.length <= 100 ? id : null;
  }

  const NO_SUCH_ENDPOINT: Message = { kind: 'error', text: 'No such webhook endpoint on this account.' };

  page('/dashboard/webhooks', (pr, signedIn) => renderWebhooks(200, signedIn, { message: noticeOf(pr) }));

  action('/dashboard/webhooks', ['url', 'description'], async (_pr, signedIn, form) => {
    const url = form.get('url') ?? '';
    const description = form.get('description') ?? '';
    try {
      const { endpoint, secret } = await createWebhookEndpoint(store, signedIn.account.id, { url, description }, webhookAllowPrivate);
      logger?.info({ accountId: signedIn.account.id, endpointId: endpoint.id }, 'webhook endpoint created');
      // Answered here rather than redirected: the secret exists only in this response.
      return renderWebhooks(200, signedIn, { created: { endpointId: endpoint.id, url: endpoint.url, secret } });
    } catch (err) {
      if (err instanceof HttpError && err.code === 'validation_error')
        return renderWebhooks(400, signedIn, { form: { url, description }, message: { kind: 'error', text: err.message } });
      throw err;
    }
  });

  action('/dashboard/webhooks/delete', ['endpoint_id'], async (_pr, signedIn, form) => {
    const id = endpointIdOf(form);
    if (id === null || !(await store.webhooks.delete(signedIn.account.id, id))) return renderWebhooks(404, signedIn, { message: NO_SUCH_ENDPOINT });
    logger?.info({ accountId: signedIn.account.id, endpointId: id }, 'webhook endpoint deleted');
    return redirect('/dashboard/webhooks?done=webhook-deleted');
  });

  action('/dashboard/webhooks/test', ['endpoint_id'], async (_pr, signedIn, form) => {
    const id = endpointIdOf(form);
    const endpoint = id === null ? null : await store.webhooks.get(signedIn.account.id, id);
    if (!endpoint) return renderWebhooks(404, signedIn, { message: NO_SUCH_ENDPOINT });
    if (endpoint.disabledAt) {
      return renderWebhooks(400, signedIn, {
        message: { kind: 'error', text: 'This endpoint is disabled (it answered 410 Gone): delete it and add it again to receive events.' },
      });
    }
    // Counted in the account's per-minute bucket, the one the API's test endpoint (and every other
    // request of the account) counts in: a page cannot flood the outbox faster than a key could.
    const rate = await store.rateLimits.take(accountRateKey(signedIn.account.id), store.plans[signedIn.account.plan].rateLimitPerMinute);
    if (!rate.allowed) {
      const reply = await renderWebhooks(429, signedIn, {
        message: { kind: 'error', text: `Too many requests for this account this minute: try again in ${rate.retryAfter} s.` },
      });
      return { ...reply, code: 'rate_limit_exceeded', headers: { ...reply.headers, ...rateLimitHeaders(rate), 'Retry-After': String(rate.retryAfter) } };
    }
    // Deleted between the two calls: the same answer as a missing one.
    if (!(await store.webhooks.sendTest(signedIn.account.id, endpoint.id))) return renderWebhooks(404, signedIn, { message: NO_SUCH_ENDPOINT });
    try {
      deps.onWebhookTest?.();
    } catch (err) {
      // The event is already in the outbox: the worker's own polling delivers it, so the page still succeeds.
      logger?.warn({ err, accountId: signedIn.account.id }, 'webhook test wake-up failed');
    }
    return redirect('/dashboard/webhooks?done=webhook-test-sent');
  });

  // --- Plan ---------------------------------------------------------------------------------------

  async function renderPlan(status: number, signedIn: SignedIn, message: Message | null): Promise<Reply> {
    const balance = await store.credits.balance(signedIn.account.id);
    const account = (await store.accounts.get(signedIn.account.id)) ?? signedIn.account;
    return htmlReply(
      status,
      planPage({
        viewer: viewerOf(signedIn),
        account,
        plans: store.plans,
        cycleEnd: balance.cycleEnd,
        now: store.clock(),
        billingConfigured: billing !== null,
        message,
      }),
    );
  }

  page('/dashboard/plan', (pr, signedIn) => renderPlan(200, signedIn, noticeOf(pr)));

  action('/dashboard/plan/cancel', [], async (_pr, signedIn) => {
    try {
      await store.accounts.cancel(signedIn.account.id);
    } catch (err) {
      if (err instanceof StoreError && err.code === 'invalid_state')
        return renderPlan(400, signedIn, { kind: 'error', text: 'The Free plan cannot be cancelled.' });
      throw err;
    }
    return redirect('/dashboard/plan?done=plan-cancelled');
  });

  action('/dashboard/plan/resume', [], async (_pr, signedIn) => {
    try {
      await store.accounts.resume(signedIn.account.id);
    } catch (err) {
      if (err instanceof StoreError && err.code === 'invalid_state') {
        return renderPlan(400, signedIn, { kind: 'error', text: 'The cancellation already took effect at the end of the cycle; choose a plan again.' });
      }
      throw err;
    }
    return redirect('/dashboard/plan?done=plan-resumed');
  });

  action('/dashboard/plan/change', ['plan'], async (_pr, signedIn, form) => {
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
    // A page with a link, not a redirect: the CSP's form-action 'self' also covers the redirects
    // that follow a form post, so browsers would block a 303 from this form to another origin.
    return htmlReply(200, checkoutPage({ viewer: viewerOf(signedIn), url, plan }));
  });

  // --- Try it -------------------------------------------------------------------------------------

  page('/dashboard/try', async (_pr, signedIn) =>
    htmlReply(200, tryPage({ viewer: viewerOf(signedIn), balance: await store.credits.balance(signedIn.account.id) })),
  );

  // The metered request: answers in the API's JSON, through the API's own admission and removal path.
  router.post('/dashboard/try', (ex) => tryEndpoint.handle(ex, () => sessions.current(pageRequest(ex, trustProxy).cookies.get(SESSION_COOKIE))), pages);

  // --- Assets -------------------------------------------------------------------------------------

  for (const [path, body, type] of [
    [CSS_PATH, CSS, 'text/css; charset=utf-8'],
    [JS_PATH, JS, 'text/javascript; charset=utf-8'],
  ] as const) {
    route('GET', path, () => ({
      status: 200,
      headers: { 'Content-Type': type, 'Cache-Control': 'public, max-age=31536000, immutable', 'X-Content-Type-Options': 'nosniff' },
      body,
    }));
  }
}
