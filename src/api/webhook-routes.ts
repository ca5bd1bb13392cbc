/**
 * Webhook endpoints of an account (docs/contract.md):
 *
 *   POST   /api/v1/webhooks            {"url": "https://...", "description": "..."} → 201, the secret shown once
 *   GET    /api/v1/webhooks            {"data": [...]} without secrets
 *   DELETE /api/v1/webhooks/:id        → 204
 *   POST   /api/v1/webhooks/:id/test   a webhook.test event → 202
 *
 * Through the one admission path, like every /api/v1 route.
 */
import type { Logger } from '../config/logger.js';
import { BodyTooLargeError, ClientGoneError, type Exchange } from '../http/exchange.js';
import type { Router } from '../http/router.js';
import type { Admission, Ticket } from '../service/admission.js';
import { ApiError } from '../service/errors.js';
import type { Store, WebhookEndpoint } from '../store/index.js';
import { createWebhookEndpoint } from '../webhooks/endpoints.js';
import { keyedHandler } from './api-key.js';

export const WEBHOOKS_PATH = '/api/v1/webhooks';
/** A JSON body of an endpoint is a URL and a description: a few KB at most. */
const MAX_JSON_BYTES = 16 * 1024;

export interface WebhookDeps {
  store: Store;
  admission: Admission;
  allowPrivate: boolean;
  logger?: Logger | undefined;
  /** A test event was written: deliver it now. */
  onEvent?: (() => void) | undefined;
}

export function endpointView(endpoint: WebhookEndpoint): Record<string, unknown> {
  return {
    id: endpoint.id,
    url: endpoint.url,
    description: endpoint.description,
    created_at: endpoint.createdAt.toISOString(),
    status: endpoint.disabledAt ? 'disabled' : 'enabled',
    disabled_at: endpoint.disabledAt?.toISOString() ?? null,
  };
}

const noSuchEndpoint = () => new ApiError('not_found', 'No such webhook endpoint.');

/** The JSON object of the request body; HttpError validation_error for anything else. */
async function readJsonObject(ex: Exchange): Promise<Record<string, unknown>> {
  if (!/^application\/json\b/i.test(ex.req.header('content-type')))
    throw new ApiError('validation_error', 'The request body must be JSON (Content-Type: application/json).', { field: 'Content-Type' });
  let body: Buffer;
  try {
    body = await ex.readBody(MAX_JSON_BYTES);
  } catch (err) {
    if (err instanceof BodyTooLargeError) throw new ApiError('validation_error', `The request body is larger than ${MAX_JSON_BYTES} bytes.`);
    if (err instanceof ClientGoneError) throw new ApiError('validation_error', err.message);
    throw err;
  }
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new ApiError('validation_error', 'The request body is not valid JSON.');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ApiError('validation_error', 'The request body must be a JSON object.');
  const unknown = Object.keys(value).filter((k) => k !== 'url' && k !== 'description');
  if (unknown.length > 0) throw new ApiError('validation_error', `Unknown field "${unknown[0]}".`, { field: unknown[0], allowed: ['url', 'description'] });
  return value as Record<string, unknown>;
}

export function mountWebhooks(router: Router, deps: WebhookDeps): void {
  const { store, logger } = deps;

  const withTicket = (handler: (ex: Exchange, ticket: Ticket) => Promise<void>) => keyedHandler(deps, handler);

  router.post(
    WEBHOOKS_PATH,
    withTicket(async (ex, ticket) => {
      const input = await readJsonObject(ex);
      const { endpoint, secret } = await createWebhookEndpoint(store, ticket.principal.accountId, input, deps.allowPrivate);
      logger?.info({ requestId: ex.requestId, endpoint: endpoint.id }, 'webhook endpoint created');
      ex.json(201, { ...endpointView(endpoint), secret }, ticket.rateHeaders);
    }),
  );

  router.get(
    WEBHOOKS_PATH,
    withTicket(async (ex, ticket) => {
      const endpoints = await store.webhooks.list(ticket.principal.accountId);
      ex.json(200, { data: endpoints.map(endpointView) }, ticket.rateHeaders);
    }),
  );

  router.delete(
    `${WEBHOOKS_PATH}/:endpoint`,
    withTicket(async (ex, ticket) => {
      if (!(await store.webhooks.delete(ticket.principal.accountId, ex.params.endpoint!))) throw noSuchEndpoint();
      ex.send(204, { ...ticket.rateHeaders, 'Cache-Control': 'no-store' }, '');
    }),
  );

  router.post(
    `${WEBHOOKS_PATH}/:endpoint/test`,
    withTicket(async (ex, ticket) => {
      const id = ex.params.endpoint!;
      if (!(await store.webhooks.sendTest(ticket.principal.accountId, id))) throw noSuchEndpoint();
      deps.onEvent?.();
      ex.json(202, { endpoint_id: id, type: 'webhook.test', status: 'queued' }, ticket.rateHeaders);
    }),
  );
}
