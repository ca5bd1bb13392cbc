/**
 * Which routes pages of other origins may call (docs/contract.md, "CORS"): the API's, keyed by API
 * key, never a route a cookie authenticates. By prefix, so that every route mounted under one now
 * or later is open, its unknown paths and wrong methods included:
 *
 *   /api/v1/   bgone's own (remove, batches, webhooks, the OpenAPI document)
 *   /v1.0/     remove.bg's dialect
 *   /v1/ /v2/  Photoroom's dialect
 *
 * Not /healthz, /readyz nor /metrics (for load balancers and scrapers, not pages; /readyz describes
 * the machine), not /internal/v1 (nodes), and never /dashboard (cookie sessions and CSRF tokens;
 * the router refuses a CORS prefix over its route group).
 */
import type { CorsPolicy, Router } from '../http/router.js';

export const API_CORS_PREFIXES: readonly string[] = ['/api/v1/', '/v1.0/', '/v1/', '/v2/'];

/** The request headers the API reads, which a page's call may carry (a preflight answers them). */
export const API_REQUEST_HEADERS: readonly string[] = ['Authorization', 'X-Api-Key', 'Content-Type', 'Idempotency-Key', 'Accept'];

/** Two hours: the longest Chromium keeps a preflight's answer. */
export const PREFLIGHT_MAX_AGE_SECONDS = 7200;

/** The policy of the API's prefixes for `origins` ('*', or the origins BGONE_CORS_ORIGINS lists). */
export function apiCorsPolicy(origins: '*' | readonly string[]): CorsPolicy {
  return { origins, allowHeaders: API_REQUEST_HEADERS, maxAgeSeconds: PREFLIGHT_MAX_AGE_SECONDS };
}

/** Opens the API's prefixes to pages of `origins`. */
export function mountApiCors(router: Router, origins: '*' | readonly string[]): void {
  router.cors(API_CORS_PREFIXES, apiCorsPolicy(origins));
}
