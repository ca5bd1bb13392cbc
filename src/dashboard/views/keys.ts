/** API keys: the list (prefix…last4, created, last used), create (the key shown once), revoke. */
import type { ApiKeyInfo } from '../../store/index.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, type Message, page, type Viewer, when } from './layout.js';

/** A freshly created key, with a copy button and the warning that it is shown only now. */
export function newKeyPanel(key: string): SafeHtml {
  return html`<section class="card" aria-labelledby="new-key-title" id="new-key-panel">
<h2 id="new-key-title">Your new API key</h2>
<div class="secret"><code id="new-key" data-testid="new-key">${key}</code><button type="button" data-copy="new-key">Copy</button></div>
<p class="warn"><strong>Copy it now: you will not see this key again.</strong> Only a hash of it is stored, so it cannot be shown later; if you lose it, create another and revoke this one.</p>
</section>`;
}

function keyLabel(key: ApiKeyInfo): string {
  return `${key.prefix}…${key.last4}`;
}

export interface KeysPageOptions {
  viewer: Viewer;
  keys: readonly ApiKeyInfo[];
  newKey?: string;
  message?: Message | null;
}

export function keysPage(options: KeysPageOptions): string {
  const { viewer, keys } = options;
  const active = keys.filter((k) => !k.revoked).length;
  const rows = [...keys].reverse().map(
    (k) => html`<tr data-key-id="${k.id}" data-key-prefix="${k.prefix}">
<td><code>${keyLabel(k)}</code></td>
<td>${when(k.createdAt)}</td>
<td>${when(k.lastUsedAt, 'never')}</td>
<td>${k.revoked ? html`<span class="badge off">revoked</span> <span class="small muted">${when(k.revokedAt)}</span>` : html`<span class="badge ok">active</span>`}</td>
<td>${k.revoked ? '' : html`<form class="inline" method="post" action="/dashboard/keys/revoke">${csrfField(viewer.csrf)}<input type="hidden" name="key_id" value="${k.id}"><button type="submit" class="danger" aria-label="Revoke ${keyLabel(k)}">Revoke</button></form>`}</td>
</tr>`,
  );
  return page(
    { title: 'API keys', viewer, section: 'keys', message: options.message },
    html`<h1>API keys</h1>
${options.newKey ? newKeyPanel(options.newKey) : ''}
<section class="card">
<p class="muted small">Send a key as <code>Authorization: Bearer rb-sk_…</code>. Every key of the account shares its credits; each key has the plan's rate limit. A revoked key is refused at once (401).</p>
<div class="table-wrap"><table id="keys-table">
<thead><tr><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Status</th><th scope="col"><span class="muted">Action</span></th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="5" class="muted">No keys yet.</td></tr>`}</tbody>
</table></div>
<form method="post" action="/dashboard/keys" class="actions">${csrfField(viewer.csrf)}<button type="submit" id="create-key">Create a new key</button><span class="small muted">${active} active</span></form>
</section>`,
  );
}
