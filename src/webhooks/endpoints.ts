/**
 * Creating a webhook endpoint, the same from the API and the dashboard: the URL checked
 * (webhook-url.ts), the description bounded and free of control characters, at most MAX_WEBHOOK_ENDPOINTS per account.
 */

import { ApiError } from '../service/errors.js';
import { hasControlCharacter } from '../service/user-text.js';
import type { CreatedWebhookEndpoint, Store } from '../store/index.js';
import { webhookUrlProblem } from './webhook-url.js';

export const MAX_WEBHOOK_ENDPOINTS = 5;
export const MAX_DESCRIPTION_LENGTH = 200;

export interface NewEndpoint {
  url?: unknown;
  description?: unknown;
}

/** Validates and creates; throws HttpError('validation_error') naming the field at fault. */
export async function createWebhookEndpoint(store: Store, accountId: number, input: NewEndpoint, allowPrivate: boolean): Promise<CreatedWebhookEndpoint> {
  if (typeof input.url !== 'string' || input.url.trim() === '') throw new ApiError('validation_error', 'url is required.', { field: 'url' });
  const url = input.url.trim();
  const problem = webhookUrlProblem(url, allowPrivate);
  if (problem) throw new ApiError('validation_error', problem, { field: 'url' });
  const description = input.description ?? '';
  if (typeof description !== 'string' || description.length > MAX_DESCRIPTION_LENGTH)
    throw new ApiError('validation_error', `description must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters.`, { field: 'description' });
  if (hasControlCharacter(description))
    throw new ApiError('validation_error', 'description must not contain control characters (NUL, tab, line breaks and the like).', {
      field: 'description',
    });
  const created = await store.webhooks.create(accountId, { url, description, maxEndpoints: MAX_WEBHOOK_ENDPOINTS });
  if (!created)
    throw new ApiError('validation_error', `An account has at most ${MAX_WEBHOOK_ENDPOINTS} webhook endpoints; delete one first.`, {
      field: 'url',
      limit: MAX_WEBHOOK_ENDPOINTS,
    });
  return created;
}
