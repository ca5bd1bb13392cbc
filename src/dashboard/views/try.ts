/** The try-it panel: upload a photo with the API's options and see the cut-out over a checkerboard. */
import type { Balance } from '../../store/index.js';
import { html } from '../html.js';
import { page, type Viewer } from './layout.js';

export function tryPage(options: { viewer: Viewer; balance: Balance }): string {
  const { viewer, balance } = options;
  return page(
    { title: 'Try it', viewer, section: 'try' },
    html`<h1>Try it</h1>
<section class="card">
<p class="small muted">Runs exactly like <code>POST /api/v1/remove</code> and costs 1 credit per successful image. Credits remaining: <strong id="credits-remaining">${balance.remaining}</strong>.</p>
<form id="try-form" method="post" action="/dashboard/try" enctype="multipart/form-data" data-csrf="${viewer.csrf}">
<label for="image_file">Image (JPG, PNG or WebP, up to 20 MB)</label>
<input id="image_file" name="image_file" type="file" accept="image/jpeg,image/png,image/webp" required>
<div class="try-grid">
<div><label for="size">Size</label><select id="size" name="size"><option value="preview">preview (0.25 MP)</option><option value="medium" selected>medium (1.5 MP)</option><option value="hd">hd (4 MP)</option><option value="full">full</option></select></div>
<div><label for="format">Format</label><select id="format" name="format"><option value="png" selected>png</option><option value="webp">webp</option><option value="jpg">jpg</option></select></div>
<div><label for="channels">Channels</label><select id="channels" name="channels"><option value="rgba" selected>rgba (cut-out)</option><option value="alpha">alpha (mask)</option></select></div>
<div><label for="crop">Crop</label><select id="crop" name="crop"><option value="false" selected>no</option><option value="true">to the subject</option><option value="1:1">1:1</option><option value="4:3">4:3</option><option value="3:4">3:4</option><option value="16:9">16:9</option></select></div>
<div><label for="padding">Padding</label><input id="padding" name="padding" type="text" placeholder="10%" maxlength="16"></div>
<div><label for="bg_color">Background</label><input id="bg_color" name="bg_color" type="text" placeholder="transparent, e.g. #ffffff" maxlength="32"></div>
</div>
<div class="actions"><button type="submit">Remove the background</button><span id="try-status" class="small" role="status" aria-live="polite"></span></div>
</form>
</section>
<section class="card" id="try-result" hidden>
<h2>Result</h2>
<div class="checker"><img id="try-image" alt="The cut-out"></div>
<div class="actions"><a class="button" id="try-download" href="#" download="cutout.png">Download</a></div>
</section>`,
  );
}
