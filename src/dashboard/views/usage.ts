/** Usage: credits used and left in the current cycle, when it resets, the rate limit, and the per-day chart. */
import type { Account, Balance, DayUsage } from '../../store/index.js';
import { planTitle } from '../catalog.js';
import { usageChart } from '../chart.js';
import { html } from '../html.js';
import { day, type Message, page, type Viewer, when } from './layout.js';

export interface UsagePageOptions {
  viewer: Viewer;
  account: Account;
  balance: Balance;
  days: readonly DayUsage[];
  now: Date;
  message?: Message | null;
}

const DAY_MS = 24 * 60 * 60 * 1000;

export function usagePage(options: UsagePageOptions): string {
  const { viewer, account, balance, days, now } = options;
  const share = balance.allowance > 0 ? Math.min(1, balance.used / balance.allowance) : 0;
  const daysLeft = Math.max(0, Math.ceil((balance.cycleEnd.getTime() - now.getTime()) / DAY_MS));
  const cancelling = account.cancelAt !== null && account.cancelAt.getTime() > now.getTime();
  return page(
    { title: 'Usage', viewer, section: 'usage', message: options.message },
    html`<h1>Usage</h1>
<div class="stats">
<div class="stat"><div class="label">Credits used this cycle</div><div class="value" id="credits-used">${balance.used}</div>
<svg class="meter" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" aria-label="${Math.round(share * 100)}% of the cycle's credits used"><rect class="track" x="0" y="0" width="100" height="10" rx="5"></rect><rect class="fill" x="0" y="0" width="${Math.round(share * 1000) / 10}" height="10" rx="5"></rect></svg>
<div class="label">of ${balance.allowance.toLocaleString('en-US')}${balance.granted > 0 ? ` (including ${balance.granted.toLocaleString('en-US')} granted)` : ''}</div></div>
<div class="stat"><div class="label">Credits remaining</div><div class="value" id="credits-remaining">${balance.remaining}</div>${balance.reserved > 0 ? html`<div class="label">${balance.reserved} held by requests in progress</div>` : ''}</div>
<div class="stat"><div class="label">Cycle resets</div><div class="value date" id="cycle-end">${when(balance.cycleEnd)}</div><div class="label">in ${daysLeft} day${daysLeft === 1 ? '' : 's'}; started ${day(balance.cycleStart)}</div></div>
<div class="stat"><div class="label">Plan and rate limit</div><div class="value" id="plan-name">${planTitle(balance.plan)}</div><div class="label" id="rate-limit">${balance.rateLimitPerMinute.toLocaleString('en-US')} requests per minute per key</div>${cancelling ? html`<div class="label">Cancelled: Free from ${day(account.cancelAt!)}</div>` : ''}</div>
</div>
<section class="card">
<h2>Requests per day this cycle</h2>
${usageChart(days, { today: now.toISOString().slice(0, 10) })}
<p class="small muted">Successful requests (1 credit each) by UTC day, from ${day(balance.cycleStart)} to ${day(new Date(balance.cycleEnd.getTime() - 1))}. Unused credits do not carry over.</p>
</section>`,
  );
}
