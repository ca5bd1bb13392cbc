/**
 * The dashboard's only two assets, served by the service itself (no CDN, no framework): the
 * stylesheet and a small script (copy buttons, the try-it panel). Their URLs carry a content hash,
 * so they can be cached for a long time and still change with a new build.
 */
import { createHash } from 'node:crypto';

export const CSS = `
:root { --fg: #1b1f24; --muted: #5b6570; --bg: #f6f7f9; --card: #fff; --line: #dde1e6; --accent: #2457d6; --accent-fg: #fff; --warn-bg: #fff6d6; --warn-line: #e6c44d; --bad: #b42318; --good: #1a7f37; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
header.top { background: #101828; color: #fff; }
header.top .inner { max-width: 960px; margin: 0 auto; padding: 0.6rem 1rem; display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; align-items: center; }
header.top .brand { font-weight: 700; font-size: 1.15rem; color: #fff; text-decoration: none; margin-right: auto; }
header.top nav { display: flex; flex-wrap: wrap; gap: 0.25rem; }
header.top nav a { color: #d0d5dd; text-decoration: none; padding: 0.3rem 0.6rem; border-radius: 6px; }
header.top nav a[aria-current="page"] { background: #344054; color: #fff; }
header.top .who { display: flex; gap: 0.5rem; align-items: center; font-size: 0.9rem; color: #d0d5dd; }
header.top .who form { margin: 0; }
header.top .who button { background: transparent; color: #fff; border: 1px solid #667085; padding: 0.2rem 0.6rem; }
main { max-width: 960px; margin: 0 auto; padding: 1rem; }
main.narrow { max-width: 28rem; }
h1 { font-size: 1.5rem; margin: 0.5rem 0 1rem; }
h2 { font-size: 1.15rem; margin: 0 0 0.75rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 1rem; margin-bottom: 1rem; }
.muted { color: var(--muted); }
.small { font-size: 0.875rem; }
.notice { border-radius: 8px; padding: 0.75rem 1rem; margin-bottom: 1rem; border: 1px solid #9fc3a8; background: #ecf7ee; }
.error { border-radius: 8px; padding: 0.75rem 1rem; margin-bottom: 1rem; border: 1px solid #f0a9a0; background: #fdeceb; color: var(--bad); }
.warn { border-radius: 8px; padding: 0.75rem 1rem; border: 1px solid var(--warn-line); background: var(--warn-bg); }
label { display: block; font-weight: 600; margin: 0.75rem 0 0.25rem; }
input[type="email"], input[type="password"], input[type="text"], input[type="url"], select { width: 100%; font: inherit; padding: 0.5rem 0.6rem; border: 1px solid #b8c0cc; border-radius: 6px; background: #fff; }
input[type="file"] { font: inherit; max-width: 100%; }
button, .button { display: inline-block; font: inherit; font-weight: 600; padding: 0.5rem 1rem; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: var(--accent-fg); cursor: pointer; text-decoration: none; }
button.secondary { background: #fff; color: var(--accent); }
button.danger { background: #fff; color: var(--bad); border-color: var(--bad); }
button:disabled { opacity: 0.6; cursor: progress; }
form.inline { display: inline; margin: 0; }
.actions { margin-top: 1rem; display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; }
pre { background: #101828; color: #e4e7ec; padding: 0.75rem; border-radius: 8px; overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; }
.secret { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; margin: 0.5rem 0; }
.secret code { flex: 1 1 16rem; background: #101828; color: #fff; padding: 0.6rem 0.75rem; border-radius: 6px; word-break: break-all; user-select: all; }
.table-wrap { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 0.5rem; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { font-size: 0.85rem; color: var(--muted); font-weight: 600; }
.stats { display: grid; grid-template-columns: repeat(auto-fit, minmax(11rem, 1fr)); gap: 0.75rem; margin-bottom: 1rem; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 0.75rem 1rem; }
.stat .value { font-size: 1.6rem; font-weight: 700; }
.stat .label { color: var(--muted); font-size: 0.85rem; }
.stat .value.date { font-size: 1.1rem; line-height: 1.3; margin: 0.35rem 0 0.2rem; }
.meter { width: 100%; height: 10px; display: block; margin-top: 0.4rem; }
.meter .track { fill: #e4e7ec; }
.meter .fill { fill: var(--accent); }
.chart { width: 100%; height: auto; display: block; }
.chart-bar { fill: #7aa2f7; }
.chart-today { fill: var(--accent); }
.chart-hit { fill: transparent; }
.chart-day:hover .chart-bar { fill: #1d3f9e; }
.chart-grid { stroke: #e4e7ec; stroke-width: 1; }
.chart-axis { stroke: #98a2b3; stroke-width: 1; }
.chart-label { fill: #667085; font-size: 11px; font-family: system-ui, sans-serif; }
.plans { display: grid; grid-template-columns: repeat(auto-fit, minmax(12rem, 1fr)); gap: 0.75rem; }
.plan { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 1rem; display: flex; flex-direction: column; gap: 0.5rem; }
.plan.current { border: 2px solid var(--accent); }
.plan h3 { margin: 0; font-size: 1.1rem; display: flex; gap: 0.5rem; align-items: center; flex-wrap: wrap; }
.plan ul { margin: 0; padding-left: 1.1rem; }
.plan .bottom { margin-top: auto; }
.badge { display: inline-block; font-size: 0.75rem; font-weight: 700; padding: 0.1rem 0.5rem; border-radius: 999px; background: var(--accent); color: #fff; }
.badge.off { background: #98a2b3; }
.badge.ok { background: var(--good); }
.badge.bad { background: var(--bad); }
.webhook h2 code { overflow-wrap: anywhere; }
.webhook h3 { margin: 1rem 0 0.25rem; }
.checker { background-color: #fff; background-image: linear-gradient(45deg, #d0d5dd 25%, transparent 25%), linear-gradient(-45deg, #d0d5dd 25%, transparent 25%), linear-gradient(45deg, transparent 75%, #d0d5dd 75%), linear-gradient(-45deg, transparent 75%, #d0d5dd 75%); background-size: 20px 20px; background-position: 0 0, 0 10px, 10px -10px, -10px 0; border-radius: 8px; border: 1px solid var(--line); min-height: 8rem; display: flex; align-items: center; justify-content: center; overflow: hidden; }
.checker img { max-width: 100%; max-height: 70vh; display: block; }
.try-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(9rem, 1fr)); gap: 0 0.75rem; }
[hidden] { display: none !important; }
@media (max-width: 480px) { .chart-label { font-size: 22px; } body { font-size: 15px; } main { padding: 0.75rem; } .stat .value { font-size: 1.35rem; } h1 { font-size: 1.3rem; } }
`;

export const JS = `
(function () {
  'use strict';

  function copyText(text, button) {
    function done() {
      var label = button.getAttribute('data-label') || button.textContent;
      button.setAttribute('data-label', label);
      button.textContent = 'Copied';
      setTimeout(function () { button.textContent = label; }, 2000);
    }
    function fallback(target) {
      var range = document.createRange();
      range.selectNodeContents(target);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      try { document.execCommand('copy'); } catch (e) { /* the text stays selected */ }
      done();
    }
    var target = document.getElementById(button.getAttribute('data-copy'));
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, function () { fallback(target); });
    else fallback(target);
  }

  Array.prototype.forEach.call(document.querySelectorAll('button[data-copy]'), function (button) {
    button.addEventListener('click', function () {
      var target = document.getElementById(button.getAttribute('data-copy'));
      if (target) copyText(target.textContent.trim(), button);
    });
  });

  // The checkout page: go on to the billing provider (a script navigation, which the CSP's
  // form-action does not cover; the link stays for browsers without scripts).
  var follow = document.querySelector('a[data-follow]');
  if (follow) window.location.assign(follow.href);

  var form = document.getElementById('try-form');
  if (!form) return;
  var status = document.getElementById('try-status');
  var result = document.getElementById('try-result');
  var image = document.getElementById('try-image');
  var download = document.getElementById('try-download');
  var remaining = document.getElementById('credits-remaining');
  var submit = form.querySelector('button[type="submit"]');
  var lastUrl = null;

  form.addEventListener('submit', function (event) {
    event.preventDefault();
    // Every control of the form that holds something: a chosen file, a value, or a choice other
    // than the API's default (a default is left out, as a client leaves it out).
    var data = new FormData();
    Array.prototype.forEach.call(form.elements, function (field) {
      if (!field.name) return;
      if (field.type === 'file') { if (field.files[0]) data.append(field.name, field.files[0], field.files[0].name); }
      else if (field.tagName === 'SELECT' && field.value === field.getAttribute('data-default')) return;
      else if (field.value.trim() !== '') data.append(field.name, field.value.trim());
    });
    if (!data.has('image_file') && !data.has('image_url')) { status.textContent = 'Choose an image first, or give its URL.'; return; }
    submit.disabled = true;
    status.textContent = 'Processing…';
    var started = Date.now();
    fetch(form.getAttribute('action'), { method: 'POST', body: data, credentials: 'same-origin', headers: { 'X-CSRF-Token': form.getAttribute('data-csrf') } })
      .then(function (res) {
        if (!res.ok) {
          return res.json().then(function (err) {
            var text = err.message + ' (' + err.code + ')';
            if (res.status === 401) text += ' Log in again to continue.';
            throw new Error(text);
          }, function () { throw new Error('The request failed with status ' + res.status + '.'); });
        }
        return res.blob().then(function (blob) {
          if (lastUrl) URL.revokeObjectURL(lastUrl);
          lastUrl = URL.createObjectURL(blob);
          image.src = lastUrl;
          result.hidden = false;
          var ext = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp', 'image/avif': 'avif', 'application/zip': 'zip' }[blob.type] || 'png';
          download.href = lastUrl;
          download.download = 'cutout.' + ext;
          var left = res.headers.get('X-Credits-Remaining');
          if (remaining && left !== null) remaining.textContent = left;
          status.textContent = res.headers.get('X-Image-Width') + ' × ' + res.headers.get('X-Image-Height') + ' px, ' +
            (Date.now() - started) + ' ms, ' + res.headers.get('X-Credits-Charged') + ' credit charged, ' + left + ' left.';
        });
      })
      .catch(function (err) { status.textContent = err.message; })
      .then(function () { submit.disabled = false; });
  });
})();
`;

function version(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 12);
}

export const CSS_PATH = '/dashboard/assets/dashboard.css';
export const JS_PATH = '/dashboard/assets/dashboard.js';
export const CSS_URL = `${CSS_PATH}?v=${version(CSS)}`;
export const JS_URL = `${JS_PATH}?v=${version(JS)}`;
