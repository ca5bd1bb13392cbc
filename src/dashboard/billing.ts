/**
 * Plan changes that cost money go through a billing provider: the dashboard asks it for a checkout
 * page and sends the user there; the provider's confirmation (outside this service) then sets the
 * plan in the store. No provider is configured by default: the dashboard then shows the CLI
 * command an operator runs instead.
 */
import type { Account, PlanName } from '../store/index.js';

export interface BillingProvider {
  /** An absolute http(s) URL of the provider's checkout for this account and plan. */
  checkoutUrl(account: Account, plan: PlanName): Promise<string>;
}

/** Characters that need no quoting in a POSIX shell word. */
const SHELL_SAFE = /^[A-Za-z0-9@%+=:,./_-]+$/;

function shellWord(word: string): string {
  return SHELL_SAFE.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The operator command that sets an account's plan. */
export function cliPlanCommand(email: string, plan: PlanName): string {
  return `npx bgone plans set --account ${shellWord(email)} --plan ${plan}`;
}

/** Accepts only absolute http(s) URLs from a provider (never a javascript: or relative URL). */
export function checkCheckoutUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error('the billing provider returned an invalid checkout URL');
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('the billing provider returned a checkout URL that is not http(s)');
  return parsed.toString();
}
