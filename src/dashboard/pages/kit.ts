/**
 * What every dashboard page module mounts its routes with: HTML error pages instead of the API's
 * JSON, the session of the request, the logged-in page and form wrappers (session, body, CSRF
 * token, in that order), and the notices shown after a redirect. routes.ts builds one kit and hands
 * it to each page module.
 */
import type { Logger } from '../../config/logger.js';
import { BodyTooLargeError, ClientGoneError, type Exchange } from '../../http/exchange.js';
import type { FallbackAnswers, Router } from '../../http/router.js';
import type { Store } from '../../store/index.js';
import { SESSION_COOKIE } from '../cookies.js';
import { CSRF_FIELD, checkSessionToken } from '../csrf.js';
import { FormError, MAX_FORM_BYTES, parseForm } from '../forms.js';
import { htmlReply, type Reply, redirect, sendReply } from '../replies.js';
import { type PageRequest, pageRequest } from '../request.js';
import type { SessionManager, SignedIn } from '../sessions.js';
import { errorPage } from '../views/errors.js';
import type { Message, Viewer } from '../views/layout.js';

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

export const FORM_EXPIRED = 'This form has expired or did not come from this dashboard. Reload the page and try again.';

export type Handler = (pr: PageRequest) => Reply | undefined | Promise<Reply | undefined>;

export interface DashboardKit {
  readonly router: Router;
  readonly store: Store;
  readonly logger: Logger | undefined;
  readonly sessions: SessionManager;
  readonly trustProxy: boolean;
  /** The HTML answers for unknown paths, wrong methods and failures under /dashboard/. */
  readonly fallback: FallbackAnswers;
  /** A route whose handler gets the page request and returns the reply (undefined: already answered). */
  route(method: 'GET' | 'POST', path: string, handler: Handler): void;
  /** A logged-in GET page; without a live session, the login page. */
  page(path: string, render: (pr: PageRequest, signedIn: SignedIn) => Reply | Promise<Reply>): void;
  /** A logged-in POST form: session, body, then the session's CSRF token, before `act` runs. */
  action(path: string, fields: readonly string[], act: (pr: PageRequest, signedIn: SignedIn, form: Map<string, string>) => Reply | Promise<Reply>): void;
  /** The form body of a POST, at most MAX_FORM_BYTES. */
  formBody(pr: PageRequest): Promise<Buffer>;
  currentSession(pr: PageRequest): Promise<SignedIn | null>;
  viewerOf(signedIn: SignedIn): Viewer;
  /** The notice named by ?done=, if any. */
  noticeOf(pr: PageRequest): Message | null;
}

export function dashboardKit(router: Router, store: Store, logger: Logger | undefined, sessions: SessionManager, trustProxy: boolean): DashboardKit {
  /** Unknown dashboard paths, wrong methods and failures answer with HTML pages, not the API's JSON. */
  const fallback: FallbackAnswers = {
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
    cookies: true,
  };

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
          if (err instanceof FormError) return fallback.failed?.(ex, err);
          throw err; // the router logs it and answers with fallback.failed
        }
        if (reply) sendReply(ex, reply);
      },
      fallback,
    );
  }

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

  return {
    router,
    store,
    logger,
    sessions,
    trustProxy,
    fallback,
    route,
    page(path, render) {
      route('GET', path, async (pr) => {
        const signedIn = await currentSession(pr);
        return signedIn ? render(pr, signedIn) : toLogin(pr);
      });
    },
    action(path, fields, act) {
      route('POST', path, async (pr) => {
        const signedIn = await currentSession(pr);
        if (!signedIn) return toLogin(pr);
        const form = parseForm(pr.ex.req.header('content-type'), await formBody(pr), [CSRF_FIELD, ...fields]);
        if (!checkSessionToken(signedIn.session.csrfToken, form.get(CSRF_FIELD))) {
          return htmlReply(403, errorPage('Form expired', FORM_EXPIRED, viewerOf(signedIn)));
        }
        return act(pr, signedIn, form);
      });
    },
    formBody,
    currentSession,
    viewerOf,
    noticeOf,
  };
}
