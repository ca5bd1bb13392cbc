/**
 * What each plan offers, for the plan page (docs/contract.md). Credits and rate limits come from the
 * store's plan table (with the configured limits); prices and extras are display text.
 */
import type { PlanName } from '../store/index.js';

export interface PlanOffer {
  title: string;
  price: string;
  extras: string[];
}

export const PLAN_OFFERS: Record<PlanName, PlanOffer> = {
  free: { title: 'Free', price: 'free, no credit card', extras: ['community support'] },
  pro: { title: 'Pro', price: '9.99 per month, billed annually', extras: ['email support', 'commercial licence'] },
  ultra: { title: 'Ultra', price: '49.99 per month, billed annually', extras: ['priority email support', 'uptime SLA of 99.9%', 'increased rate limits'] },
  mega: { title: 'Mega', price: '199.99 per month, billed annually', extras: ['direct engineering support', 'uptime SLA of 99.9%', 'highest rate limits'] },
};

export function planTitle(plan: PlanName): string {
  return PLAN_OFFERS[plan].title;
}
