/** The page shell: head (viewport, the service's own CSS and script), top bar with navigation, messages. */
import { CSS_URL, JS_URL } from '../assets.js';
import { type HtmlValue, html, type SafeHtml } from '../html.js';

export type Section = 'usage' | 'keys' | 'webhooks' | 'plan' | 'try';

export interface Viewer {
  email: string;
  /** The session's CSRF token, for the forms of the page. */
  csrf: string;
}

export interface Message {
  kind: 'notice' | 'error';
  text: string;
}

export interface PageOptions {
  title: string;
  viewer?: Viewer;
  section?: Section;
  message?: Message | null;
  /** Narrow column (sign-up, login). */
  narrow?: boolean;
  /** Whether visitors are offered sign-up in the top bar (BGONE_SIGNUP); default true. */
  signupOpen?: boolean;
}

const SECTIONS: Array<[Section, string, string]> = [
  ['usage', 'Usage', '/dashboard'],
  ['keys', 'API keys', '/dashboard/keys'],
  ['webhooks', 'Webhooks', '/dashboard/webhooks'],
  ['plan', 'Plan', '/dashboard/plan'],
  ['try', 'Try it', '/dashboard/try'],
];

export function csrfField(token: string): SafeHtml {
  return html`<input type="hidden" name="csrf" value="${token}">`;
}

export function messageBox(message: Message | null | undefined): SafeHtml {
  if (!message) return html``;
  return html`<div class="${message.kind}" role="${message.kind === 'error' ? 'alert' : 'status'}" data-testid="message">${message.text}</div>`;
}

const DATE_FORMAT = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' });
const DAY_FORMAT = new Intl.DateTimeFormat('en-GB', { dateStyle: 'medium', timeZone: 'UTC' });

/** A <time> with an unambiguous UTC text. */
export function when(date: Date | null, empty = '—'): SafeHtml {
  if (!date) return html`<span class="muted">${empty}</span>`;
  return html`<time datetime="${date.toISOString()}">${DATE_FORMAT.format(date)} UTC</time>`;
}

export function day(date: Date): SafeHtml {
  return html`<time datetime="${date.toISOString()}">${DAY_FORMAT.format(date)}</time>`;
}

export function page(options: PageOptions, content: HtmlValue): string {
  const { viewer } = options;
  const nav = viewer
    ? html`<nav aria-label="Dashboard">${SECTIONS.map(([id, label, href]) => html`<a href="${href}"${id === options.section ? html` aria-current="page"` : ''}>${label}</a>`)}</nav>
      <div class="who"><span>${viewer.email}</span><form class="inline" method="post" action="/dashboard/logout">${csrfField(viewer.csrf)}<button type="submit">Log out</button></form></div>`
    : html`<nav aria-label="Account"><a href="/dashboard/login">Log in</a>${options.signupOpen === false ? '' : html`<a href="/dashboard/signup">Sign up</a>`}</nav>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${options.title} · bgone</title>
<link rel="stylesheet" href="${CSS_URL}">
<script src="${JS_URL}" defer></script>
</head>
<body>
<header class="top"><div class="inner"><a class="brand" href="/dashboard">bgone</a>${nav}</div></header>
<main${options.narrow ? html` class="narrow"` : ''}>
${messageBox(options.message)}
${content}
</main>
</body>
</html>
`.value;
}
