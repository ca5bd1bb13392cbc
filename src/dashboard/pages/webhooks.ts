/**
 * The webhooks page: GET /dashboard/webhooks (endpoints and their recent deliveries), POST
 * /dashboard/webhooks (create: the secret is shown once, in that answer), /dashboard/webhooks/delete
 * and /dashboard/webhooks/test (a webhook.test event, counted in the account's rate limit).
 */

import { HttpError } from '../../http/errors.js';
import { accountRateKey } from '../../service/admission.js';
import { rateLimitHeaders } from '../../service/rate-limit.js';
import { createWebhookEndpoint, MAX_DESCRIPTION_LENGTH, MAX_WEBHOOK_ENDPOINTS } from '../../webhooks/endpoints.js';
import { MAX_WEBHOOK_URL_LENGTH } from '../../webhooks/webhook-url.js';
import { htmlReply, type Reply, redirect } from '../replies.js';
import type { SignedIn } from '../sessions.js';
import type { Message } from '../views/layout.js';
import { type WebhooksPageOptions, webhooksPage } from '../views/webhooks.js';
import type { DashboardKit } from './kit.js';

/** Deliveries shown under each webhook endpoint. */
const RECENT_DELIVERIES = 10;

const NO_SUCH_ENDPOINT: Message = { kind: 'error', text: 'No such webhook endpoint on this account.' };

export interface WebhookPagesDeps {
  /** BGONE_WEBHOOK_ALLOW_PRIVATE: accept http:// and private-address webhook URLs. */
  webhookAllowPrivate: boolean;
  /** Called once a test event is in the outbox, so that the delivery worker can look at once. */
  onWebhookTest?: (() => void) | undefined;
}

/** The endpoint a delete or test form names, or null for a missing or absurd one (the store then has nothing to find). */
function endpointIdOf(form: Map<string, string>): string | null {
  const id = form.get('endpoint_id');
  return id !== undefined && id.length > 0 && id.length <= 100 ? id : null;
}

export function mountWebhooks(kit: DashboardKit, { webhookAllowPrivate, onWebhookTest }: WebhookPagesDeps): void {
  const { store, logger } = kit;

  async function renderWebhooks(status: number, signedIn: SignedIn, extra: Pick<WebhooksPageOptions, 'created' | 'form' | 'message'> = {}): Promise<Reply> {
    const accountId = signedIn.account.id;
    const endpoints = await store.webhooks.list(accountId);
    const withDeliveries = await Promise.all(
      endpoints.map(async (endpoint) => ({ endpoint, deliveries: await store.webhooks.deliveries(accountId, endpoint.id, RECENT_DELIVERIES) })),
    );
    return htmlReply(
      status,
      webhooksPage({
        viewer: kit.viewerOf(signedIn),
        endpoints: withDeliveries,
        maxEndpoints: MAX_WEBHOOK_ENDPOINTS,
        maxUrlLength: MAX_WEBHOOK_URL_LENGTH,
        maxDescriptionLength: MAX_DESCRIPTION_LENGTH,
        allowPrivate: webhookAllowPrivate,
        ...extra,
      }),
    );
  }

  kit.page('/dashboard/webhooks', (pr, signedIn) => renderWebhooks(200, signedIn, { message: kit.noticeOf(pr) }));

  kit.action('/dashboard/webhooks', ['url', 'description'], async (_pr, signedIn, form) => {
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

  kit.action('/dashboard/webhooks/delete', ['endpoint_id'], async (_pr, signedIn, form) => {
    const id = endpointIdOf(form);
    if (id === null || !(await store.webhooks.delete(signedIn.account.id, id))) return renderWebhooks(404, signedIn, { message: NO_SUCH_ENDPOINT });
    logger?.info({ accountId: signedIn.account.id, endpointId: id }, 'webhook endpoint deleted');
    return redirect('/dashboard/webhooks?done=webhook-deleted');
  });

  kit.action('/dashboard/webhooks/test', ['endpoint_id'], async (_pr, signedIn, form) => {
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
      onWebhookTest?.();
    } catch (err) {
      // The event is already in the outbox: the worker's own polling delivers it, so the page still succeeds.
      logger?.warn({ err, accountId: signedIn.account.id }, 'webhook test wake-up failed');
    }
    return redirect('/dashboard/webhooks?done=webhook-test-sent');
  });
}
