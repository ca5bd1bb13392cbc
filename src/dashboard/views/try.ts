/**
 * The try-it panel: upload a photo with the API's options and see the cut-out over a checkerboard.
 * Its form has one control per option of the option table that a form carries (src/lib/option-table.ts),
 * but the base64 source, which is for programs: a select where the option has a closed list of
 * values, a file input for a file part, a text input otherwise.
 */
import { type OptionRow, optionsFor } from '../../lib/option-table.js';
import type { Balance } from '../../store/index.js';
import { html, type SafeHtml } from '../html.js';
import { page, type Viewer } from './layout.js';

/** Form options the panel leaves out. */
export const TRY_LEFT_OUT: readonly string[] = ['image_file_b64'];

/** Values the panel starts with where they differ from the API's default: a quick, cheap first try. */
const TRY_DEFAULTS: Readonly<Record<string, string>> = { size: 'medium' };

/** One curl line per dialect. */
export const CURL_LINES: readonly string[] = [
  'curl -H \'Authorization: Bearer rb-sk_...\' -F image_file=@photo.jpg -F format=auto -o cutout "$BGONE_URL/api/v1/remove"',
  'curl -H \'X-Api-Key: rb-sk_...\' -F image_file=@photo.jpg -F size=auto -o cutout "$BGONE_URL/v1.0/removebg"   # remove.bg',
  'curl -H \'x-api-key: rb-sk_...\' -F image_file=@photo.jpg -o cutout.png "$BGONE_URL/v1/segment"   # Photoroom',
  'curl -H \'x-api-key: rb-sk_...\' -F imageFile=@photo.jpg -F outputSize=1000x1000 -F horizontalAlignment=center -F verticalAlignment=center -F background.color=FFFFFF -o edited.png "$BGONE_URL/v2/edit"   # Photoroom v2',
];

/** The panel's options, in the table's order. */
export function tryOptions(): OptionRow[] {
  return optionsFor('form').filter((row) => !TRY_LEFT_OUT.includes(row.name));
}

function control(row: OptionRow): SafeHtml {
  const label = row.name.replaceAll('_', ' ');
  const title = row.description;
  if (row.part === 'file') {
    return html`<div><label for="${row.name}">${label}</label><input id="${row.name}" name="${row.name}" type="file" accept="image/jpeg,image/png,image/webp" title="${title}"></div>`;
  }
  if (row.choices) {
    const selected = TRY_DEFAULTS[row.name] ?? row.default;
    return html`<div><label for="${row.name}">${label}</label><select id="${row.name}" name="${row.name}" data-default="${row.default}" title="${title}">${row.choices.map(
      (choice) => html`<option value="${choice}"${choice === selected ? html` selected` : ''}>${choice}</option>`,
    )}</select></div>`;
  }
  return html`<div><label for="${row.name}">${label}</label><input id="${row.name}" name="${row.name}" type="text" placeholder="${row.example}" maxlength="${Math.min(row.maxLength, 2048)}" title="${title}"></div>`;
}

export function tryPage(options: { viewer: Viewer; balance: Balance }): string {
  const { viewer, balance } = options;
  const rows = tryOptions();
  const image = rows.filter((row) => row.name.startsWith('image_'));
  const rest = rows.filter((row) => !row.name.startsWith('image_'));
  return page(
    { title: 'Try it', viewer, section: 'try' },
    html`<h1>Try it</h1>
<section class="card">
<p class="small muted">Runs exactly like <code>POST /api/v1/remove</code> and costs 1 credit per successful image. Credits remaining: <strong id="credits-remaining">${balance.remaining}</strong>.</p>
<form id="try-form" method="post" action="/dashboard/try" enctype="multipart/form-data" data-csrf="${viewer.csrf}">
<p class="small muted">The image (JPG, PNG or WebP, up to 20 MB), as a file or by URL:</p>
<div class="try-grid">
${image.map(control)}
</div>
<div class="try-grid">
${rest.map(control)}
</div>
<div class="actions"><button type="submit">Remove the background</button><span id="try-status" class="small" role="status" aria-live="polite"></span></div>
</form>
</section>
<section class="card" id="try-curl">
<h2>From a terminal</h2>
<p class="small muted">The same request with an API key (<code>$BGONE_URL</code> is this server's address), in bgone's API and in the two hosted APIs it speaks; docs/compatibility.md has their mapping:</p>
${CURL_LINES.map((line) => html`<pre>${line}</pre>`)}
</section>
<section class="card" id="try-result" hidden>
<h2>Result</h2>
<div class="checker"><img id="try-image" alt="The cut-out"></div>
<div class="actions"><a class="button" id="try-download" href="#" download="cutout.png">Download</a></div>
</section>`,
  );
}
