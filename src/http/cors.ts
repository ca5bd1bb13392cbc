/**
 * Cross-origin resource sharing (the Fetch standard's CORS protocol) for the routes a router puts
 * under a policy (Router.cors): what lets a page of another origin call them with fetch() and read
 * the answer. Which routes get it is decided where routes are mounted; this module only writes the
 * headers.
 *
 * - Every answer under a policy says which origin may read it: `Access-Control-Allow-Origin: *`, or
 *   the request's Origin when the policy lists it (with `Vary: Origin`, written on every answer of a
 *   listed policy so that a cache never hands one origin's answer to another). An unlisted origin
 *   gets no Access-Control-* header: the browser keeps the answer from its page.
 * - An answer a page may read exposes every header it carries (`Access-Control-Expose-Headers`),
 *   but those a page reads anyway (the CORS-safelisted response headers) and the protocol's own, so
 *   that a route's headers (X-Credits-Charged, Retry-After...) reach scripts without a list to keep.
 * - A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered 204 at once,
 *   before any route: the methods of the path, the request headers the policy takes, how long the
 *   browser may keep the answer. It reads nothing, not even the body: as cheap as a 404.
 * - Credentials are never allowed (no Access-Control-Allow-Credentials): a browser then sends no
 *   cookie with a cross-origin call, and a route that a cookie authenticates must not be under a
 *   policy at all (the router refuses a policy over a route group with answers of its own).
 */
import type { HttpRequest, OutgoingHeaders } from './types.js';

export interface CorsPolicy {
  /** '*' (any page), or the origins whose pages may read the answers: `scheme://host[:port]`, in lower case. */
  readonly origins: '*' | readonly string[];
  /** The request headers a page may send (Access-Control-Allow-Headers); names are case-insensitive. */
  readonly allowHeaders: readonly string[];
  /** Seconds a browser may keep a preflight's answer (Access-Control-Max-Age). */
  readonly maxAgeSeconds: number;
}

/** Response headers a page reads without their being exposed (Fetch, "CORS-safelisted response-header name"). */
const SAFELISTED = new Set(['cache-control', 'content-language', 'content-length', 'content-type', 'expires', 'last-modified', 'pragma']);
/** Headers never listed as exposed: the protocol's own, and those the backend owns or a browser hides anyway. */
const NEVER_EXPOSED = new Set(['vary', 'connection', 'transfer-encoding', 'set-cookie', 'set-cookie2']);

/** Whether a request is a CORS preflight: OPTIONS with an Origin and the method it asks for. */
export function isPreflight(req: HttpRequest): boolean {
  return req.method === 'OPTIONS' && req.header('origin') !== '' && req.header('access-control-request-method') !== '';
}

/** The origin an answer names for a request from `origin` ('' when none came): '*', the listed origin, or undefined. */
function allowedOrigin(policy: CorsPolicy, origin: string): string | undefined {
  if (policy.origins === '*') return '*';
  const asked = origin.toLowerCase();
  return policy.origins.find((listed) => listed === asked);
}

/** The CORS headers of an answer under `policy` to a request from `origin` (the header's value, '' when none). */
export function corsAnswerHeaders(policy: CorsPolicy, origin: string): OutgoingHeaders {
  const allowed = allowedOrigin(policy, origin);
  const vary: OutgoingHeaders = policy.origins === '*' ? {} : { Vary: 'Origin' };
  return allowed === undefined ? vary : { 'Access-Control-Allow-Origin': allowed, ...vary };
}

/**
 * The headers of the 204 answering a preflight from `origin` to a path whose routes take `methods`:
 * only `Vary` for an origin the policy does not list (the browser then refuses the call).
 */
export function preflightHeaders(policy: CorsPolicy, origin: string, methods: readonly string[]): OutgoingHeaders {
  const headers = corsAnswerHeaders(policy, origin);
  if (!('Access-Control-Allow-Origin' in headers)) return headers;
  return {
    ...headers,
    'Access-Control-Allow-Methods': methods.join(', '),
    'Access-Control-Allow-Headers': policy.allowHeaders.join(', '),
    'Access-Control-Max-Age': String(policy.maxAgeSeconds),
  };
}

/**
 * An answer's headers with `cors` (corsAnswerHeaders) added: a Vary the route wrote is kept and
 * joined, and when a page may read the answer, every header it carries but the safelisted ones and
 * the protocol's own is exposed.
 */
export function withCorsHeaders(headers: OutgoingHeaders, cors: OutgoingHeaders): OutgoingHeaders {
  const out: Record<string, string | readonly string[]> = { ...headers };
  for (const [name, value] of Object.entries(cors)) {
    const present = Object.keys(out).find((key) => key.toLowerCase() === name.toLowerCase());
    if (present !== undefined && name.toLowerCase() === 'vary') out[present] = [out[present], value].flat().join(', ');
    else {
      if (present !== undefined) delete out[present];
      out[name] = value;
    }
  }
  if (!('Access-Control-Allow-Origin' in cors)) return out;
  const exposed = Object.keys(out).filter((name) => {
    const lower = name.toLowerCase();
    return !SAFELISTED.has(lower) && !NEVER_EXPOSED.has(lower) && !lower.startsWith('access-control-');
  });
  if (exposed.length > 0) out['Access-Control-Expose-Headers'] = exposed.join(', ');
  return out;
}
