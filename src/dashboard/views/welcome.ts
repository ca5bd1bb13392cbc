/** Right after sign-up: the first API key (shown once) and the quickest ways to see it work. */
import { html } from '../html.js';
import { newKeyPanel } from './keys.js';
import { page, type Viewer } from './layout.js';

export function welcomePage(options: { viewer: Viewer; key: string; origin: string }): string {
  const curl = `curl -H "Authorization: Bearer ${options.key}" -F image_file=@photo.jpg -o cutout.png ${options.origin}/api/v1/remove`;
  return page(
    {
      title: 'Welcome',
      viewer: options.viewer,
      section: 'keys',
      message: { kind: 'notice', text: 'Your account is ready, on the Free plan: 100 credits a month.' },
    },
    html`<h1>Welcome to bgone</h1>
${newKeyPanel(options.key)}
<section class="card">
<h2>Try it</h2>
<p>Upload a photo in the browser: <a class="button" href="/dashboard/try">Try it now</a></p>
<p>Or from a terminal:</p>
<pre id="curl-example">${curl}</pre>
<p class="small muted">Each successful request costs 1 credit. Follow your usage on the <a href="/dashboard">Usage</a> page.</p>
</section>`,
  );
}
