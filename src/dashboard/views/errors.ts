/** Error pages of the dashboard (HTML; the try-it endpoint answers the API's JSON instead). */
import { html } from '../html.js';
import { page, type Viewer } from './layout.js';

export function errorPage(title: string, message: string, viewer?: Viewer): string {
  return page(
    { title, viewer, narrow: !viewer },
    html`<h1>${title}</h1>
<div class="error" role="alert">${message}</div>
<p><a href="/dashboard">Back to the dashboard</a></p>`,
  );
}
