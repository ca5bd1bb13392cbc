/**
 * A minimal browser for the dashboard's HTTP tests: Node's fetch with a cookie jar (it honours
 * Max-Age=0 deletions), no automatic redirects, form posts as application/x-www-form-urlencoded,
 * and helpers to read the CSRF token and the new API key out of the returned HTML.
 */
export interface PageResult {
  status: number;
  headers: Headers;
  html: string;
  /** The raw Set-Cookie headers of this response. */
  setCookies: string[];
  location: string | null;
}

export class DashboardClient {
  readonly cookies = new Map<string, string>();

  constructor(
    readonly baseUrl: string,
    /** Headers sent with every request (e.g. X-Forwarded-For behind a trusted proxy). */
    public extraHeaders: Record<string, string> = {},
  ) {}

  cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async request(
    method: string,
    path: string,
    init: { form?: Record<string, string>; body?: BodyInit; headers?: Record<string, string> } = {},
  ): Promise<PageResult> {
    const headers: Record<string, string> = { ...this.extraHeaders, ...init.headers };
    if (this.cookies.size > 0) headers.cookie = this.cookieHeader();
    let body = init.body;
    if (init.form) {
      body = new URLSearchParams(init.form).toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    const res = await fetch(`${this.baseUrl}${path}`, { method, headers, body, redirect: 'manual' });
    const setCookies = res.headers.getSetCookie();
    for (const cookie of setCookies) {
      const [pair, ...attrs] = cookie.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      if (attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return { status: res.status, headers: res.headers, html: await res.text(), setCookies, location: res.headers.get('location') };
  }

  get(path: string, headers?: Record<string, string>): Promise<PageResult> {
    return this.request('GET', path, { headers });
  }

  post(path: string, form: Record<string, string>, headers?: Record<string, string>): Promise<PageResult> {
    return this.request('POST', path, { form, headers });
  }

  /** GETs `page` and posts its form to `action` with the page's CSRF token added. */
  async submit(page: string, action: string, fields: Record<string, string> = {}): Promise<PageResult> {
    const token = csrfToken((await this.get(page)).html);
    return this.post(action, { csrf: token, ...fields });
  }

  async signUp(email: string, password: string): Promise<PageResult & { key: string }> {
    const page = await this.submit('/dashboard/signup', '/dashboard/signup', { email, password });
    return { ...page, key: newKey(page.html) };
  }

  logIn(email: string, password: string): Promise<PageResult> {
    return this.submit('/dashboard/login', '/dashboard/login', { email, password });
  }
}

/** The first CSRF hidden field of a page. */
export function csrfToken(html: string): string {
  const m = /name="csrf" value="([^"]+)"/.exec(html);
  if (!m) throw new Error('no CSRF field on the page');
  return m[1]!;
}

/** The try-it form's CSRF token (sent as X-CSRF-Token). */
export function tryToken(html: string): string {
  const m = /id="try-form"[^>]*data-csrf="([^"]+)"/.exec(html);
  if (!m) throw new Error('no try-it form on the page');
  return m[1]!;
}

/** The API key shown once (empty string when the page shows none). */
export function newKey(html: string): string {
  return /<code id="new-key"[^>]*>([^<]+)<\/code>/.exec(html)?.[1] ?? '';
}

/** The alert or status message of a page. */
export function message(html: string): string {
  return /data-testid="message">([^<]*)</.exec(html)?.[1] ?? '';
}

export function parseSetCookie(header: string): { name: string; value: string; attributes: string[] } {
  const [pair, ...attrs] = header.split(';').map((s) => s.trim());
  const eq = pair!.indexOf('=');
  return { name: pair!.slice(0, eq), value: pair!.slice(eq + 1), attributes: attrs.map((a) => a.toLowerCase()) };
}
