/**
 * The rules of a webhook endpoint's URL (docs/contract.md), over the library's address guard
 * (src/lib/address-guard.ts): `https://` only, no credentials, no fragment, no control characters,
 * and never a loopback, private, link-local or metadata address. A URL is checked on its text when
 * an endpoint is created, and again on the address its name resolves to at each delivery
 * (deliverer.ts connects to exactly that address). `allowPrivate` (BGONE_WEBHOOK_ALLOW_PRIVATE)
 * lifts the address rules and accepts `http://` too, for local setups and tests.
 */
import { type CheckedAddress, MAX_URL_LENGTH, type ResolveOptions, resolveCheckedAddress, urlHost, urlProblem } from '../lib/address-guard.js';

/** At most this long, so a URL always fits the outbox and the logs. */
export const MAX_WEBHOOK_URL_LENGTH = MAX_URL_LENGTH;

/** Checks a webhook URL's text; returns why it is refused, or null. */
export function webhookUrlProblem(raw: string, allowPrivate: boolean): string | null {
  const problem = urlProblem(raw, { allowPrivate, schemes: allowPrivate ? ['https:', 'http:'] : ['https:'] });
  if (problem) return problem.message;
  if (new URL(raw).hash) return 'The URL must not contain a fragment.';
  return null;
}

/**
 * Resolves a webhook URL's host to the one address a delivery connects to, refusing (with an Error
 * whose message says why) a forbidden URL or a name with any forbidden address among its answers.
 */
export async function resolveWebhookAddress(raw: string, allowPrivate: boolean, options: ResolveOptions = {}): Promise<CheckedAddress> {
  const problem = webhookUrlProblem(raw, allowPrivate);
  if (problem) throw new Error(problem);
  return resolveCheckedAddress(urlHost(new URL(raw)), allowPrivate, options);
}
