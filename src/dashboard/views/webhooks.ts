/**
 * Webhooks: the account's endpoints (URL, description, created, active or disabled), add one (its
 * signing secret shown once), delete one, send it a test event, and each endpoint's recent
 * deliveries (event, status, last answer, attempts, next retry).
 */
import type { WebhookDelivery, WebhookEndpoint } from '../../store/index.js';
import { MAX_ATTEMPTS, RETRY_DELAYS_MS } from '../../webhooks/retry-schedule.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, type Message, page, type Viewer, when } from './layout.js';

export interface EndpointWithDeliveries {
  endpoint: WebhookEndpoint;
  /** Newest first. */
  deliveries: readonly WebhookDelivery[];
}

export interface WebhooksPageOptions {
  viewer: Viewer;
  /** Oldest first, as the store lists them. */
  endpoints: readonly EndpointWithDeliveries[];
  /** How many endpoints an account may have. */
  maxEndpoints: number;
  maxUrlLength: number;
  maxDescriptionLength: number;
  /** BGONE_WEBHOOK_ALLOW_PRIVATE: http:// and private addresses are accepted, and the help text says so. */
  allowPrivate: boolean;
  /** Right after creation: the new endpoint's secret, shown this once. */
  created?: NewEndpointSecret;
  /** What the add form held when it was refused, so it can be corrected rather than retyped. */
  form?: { url: string; description: string };
  message?: Message | null;
}

export interface NewEndpointSecret {
  endpointId: string;
  url: string;
  secret: string;
}

const SECOND_FORMAT = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeStyle: 'medium', timeZone: 'UTC' });

/** Like layout's when(), to the second: the first retries come seconds apart, which minutes would hide. */
function whenExactly(date: Date | null, empty = '—'): SafeHtml {
  if (!date) return html`<span class="muted">${empty}</span>`;
  return html`<time datetime="${date.toISOString()}">${SECOND_FORMAT.format(date)} UTC</time>`;
}

/** The retry schedule's span, for the help text (so it follows the schedule if that changes). */
const RETRY_HOURS = Math.round(RETRY_DELAYS_MS.reduce((sum, ms) => sum + ms, 0) / 3_600_000);

function urlRule(allowPrivate: boolean): SafeHtml {
  return allowPrivate
    ? html`This service accepts <code>http://</code> URLs and private addresses (<code>BGONE_WEBHOOK_ALLOW_PRIVATE</code>).`
    : html`The URL must start with <code>https://</code> and reach a public address.`;
}

function secretPanel(created: NewEndpointSecret): SafeHtml {
  return html`<section class="card" aria-labelledby="new-secret-title" id="new-webhook-panel" data-endpoint-id="${created.endpointId}">
<h2 id="new-secret-title">Signing secret of the new endpoint</h2>
<p class="small">For <code>${created.url}</code></p>
<div class="secret"><code id="new-webhook-secret" data-testid="new-webhook-secret">${created.secret}</code><button type="button" data-copy="new-webhook-secret">Copy</button></div>
<p class="warn"><strong>Copy it now: you will not see this secret again.</strong> Your receiver checks each event's <code>webhook-signature</code> header with it (HMAC-SHA256, as the Standard Webhooks specification describes). If you lose it, delete this endpoint and add it again.</p>
</section>`;
}

const STATUS_BADGES: Record<WebhookDelivery['status'], SafeHtml> = {
  pending: html`<span class="badge">pending</span>`,
  delivered: html`<span class="badge ok">delivered</span>`,
  failed: html`<span class="badge bad">failed</span>`,
};

/** The last attempt's answer: its status code, why it failed, or both; a dash before any attempt. */
function lastAnswer(d: WebhookDelivery): SafeHtml {
  const parts: SafeHtml[] = [];
  if (d.lastStatusCode !== null) parts.push(html`<code>${d.lastStatusCode}</code>`);
  if (d.lastError) parts.push(html`<span class="small muted">${d.lastError}</span>`);
  if (parts.length === 0) return html`<span class="muted">—</span>`;
  return html`${parts.map((part, i) => (i === 0 ? part : html` ${part}`))}`;
}

/** Pending: when it is tried next. Otherwise nothing is due; say when it was delivered, if it was. */
function nextRetry(d: WebhookDelivery): SafeHtml {
  if (d.status === 'pending') return whenExactly(d.nextAttemptAt, 'now');
  if (d.status === 'delivered') return html`<span class="small muted">delivered ${whenExactly(d.deliveredAt)}</span>`;
  return html`<span class="small muted">no more attempts</span>`;
}

function deliveriesTable(endpoint: WebhookEndpoint, deliveries: readonly WebhookDelivery[]): SafeHtml {
  const rows = deliveries.map(
    (d) => html`<tr data-delivery-id="${d.id}" data-delivery-type="${d.type}" data-delivery-status="${d.status}">
<td><code>${d.type}</code></td>
<td>${whenExactly(d.createdAt)}</td>
<td>${STATUS_BADGES[d.status]}</td>
<td>${lastAnswer(d)}</td>
<td data-attempts="${d.attempts}">${d.attempts} <span class="small muted">of ${MAX_ATTEMPTS}</span></td>
<td>${nextRetry(d)}</td>
</tr>`,
  );
  return html`<div class="table-wrap"><table class="deliveries" data-deliveries-of="${endpoint.id}" aria-label="Recent deliveries">
<thead><tr><th scope="col">Event</th><th scope="col">Created</th><th scope="col">Status</th><th scope="col">Last answer</th><th scope="col">Attempts</th><th scope="col">Next retry</th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="6" class="muted">No deliveries yet.</td></tr>`}</tbody>
</table></div>`;
}

function endpointCard(viewer: Viewer, { endpoint, deliveries }: EndpointWithDeliveries): SafeHtml {
  const csrf = csrfField(viewer.csrf);
  const idField = html`<input type="hidden" name="endpoint_id" value="${endpoint.id}">`;
  const state = endpoint.disabledAt
    ? html`<span class="badge off">disabled</span> <span class="small muted">since ${when(endpoint.disabledAt)}: it answered 410 Gone, so no events are sent to it. Delete it and add it again to receive events.</span>`
    : html`<span class="badge ok">active</span>`;
  // A disabled endpoint gets no events, a test one included, so it offers no test button.
  const testButton = endpoint.disabledAt
    ? ''
    : html`<form class="inline" method="post" action="/dashboard/webhooks/test">${csrf}${idField}<button type="submit" class="secondary">Send a test event</button></form>`;
  return html`<section class="card webhook" data-endpoint-id="${endpoint.id}">
<h2 class="webhook-url"><code>${endpoint.url}</code></h2>
${endpoint.description ? html`<p class="webhook-description">${endpoint.description}</p>` : ''}
<p class="small">${state} <span class="muted">· <code>${endpoint.id}</code> · created ${when(endpoint.createdAt)}</span></p>
<h3 class="small">Recent deliveries</h3>
${deliveriesTable(endpoint, deliveries)}
<div class="actions">${testButton}<form class="inline" method="post" action="/dashboard/webhooks/delete">${csrf}${idField}<button type="submit" class="danger" aria-label="Delete the endpoint ${endpoint.url}">Delete</button></form></div>
</section>`;
}

export function webhooksPage(options: WebhooksPageOptions): string {
  const { viewer, endpoints, maxEndpoints } = options;
  const full = endpoints.length >= maxEndpoints;
  const addForm = full
    ? html`<p class="small muted" id="webhooks-full">This account has ${maxEndpoints} endpoints, the most it can have: delete one to add another.</p>`
    : html`<form method="post" action="/dashboard/webhooks" id="add-webhook">
${csrfField(viewer.csrf)}
<label for="webhook-url">URL</label>
<input id="webhook-url" name="url" type="url" required maxlength="${options.maxUrlLength}" placeholder="https://example.com/bgone-events" value="${options.form?.url ?? ''}">
<label for="webhook-description">Description <span class="muted small">(optional)</span></label>
<input id="webhook-description" name="description" type="text" maxlength="${options.maxDescriptionLength}" value="${options.form?.description ?? ''}">
<div class="actions"><button type="submit">Add the endpoint</button><span class="small muted">${endpoints.length} of ${maxEndpoints}</span></div>
</form>`;
  return page(
    { title: 'Webhooks', viewer, section: 'webhooks', message: options.message },
    html`<h1>Webhooks</h1>
${options.created ? secretPanel(options.created) : ''}
<section class="card">
<h2>Add an endpoint</h2>
<p class="small muted">Batches (<code>POST /api/v1/batches</code>) send <code>image.processed</code> and <code>batch.completed</code> events to every active endpoint of the account, signed with its secret. ${urlRule(options.allowPrivate)} An event that does not get a 2xx answer within 15 seconds is retried ${RETRY_DELAYS_MS.length} times over about ${RETRY_HOURS} hours.</p>
${addForm}
</section>
${endpoints.length > 0 ? endpoints.map((e) => endpointCard(viewer, e)) : html`<p class="muted" id="no-webhooks">No endpoints yet.</p>`}`,
  );
}
