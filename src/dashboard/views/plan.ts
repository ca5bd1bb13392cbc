/**
 * The four plans side by side, the current one marked; cancel / resume a paid plan; upgrades
 * through the billing provider, or the operator's CLI command when there is none. The way to the
 * provider's checkout is a page with a link (followed at once by the page's script).
 */
import type { Account, PlanName, PlanTable } from '../../store/index.js';
import { PLAN_NAMES } from '../../store/index.js';
import { cliPlanCommand } from '../billing.js';
import { PLAN_OFFERS, planTitle } from '../catalog.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, type Message, page, type Viewer, when } from './layout.js';

export interface PlanPageOptions {
  viewer: Viewer;
  account: Account;
  plans: PlanTable;
  cycleEnd: Date;
  now: Date;
  billingConfigured: boolean;
  message?: Message | null;
}

export function planPage(options: PlanPageOptions): string {
  const { viewer, account, plans, now } = options;
  const current = account.plan;
  const pendingCancel = account.cancelAt !== null && account.cancelAt.getTime() > now.getTime();
  const csrf = csrfField(viewer.csrf);

  let status: SafeHtml;
  if (pendingCancel) {
    status = html`<div class="warn" id="plan-status" role="status"><p><strong>Your ${planTitle(current)} plan is cancelled.</strong> It stays until the end of the billing cycle, ${when(account.cancelAt)}, with its remaining credits; then the account moves to Free.</p>
<form method="post" action="/dashboard/plan/resume" class="actions">${csrf}<button type="submit" id="resume-plan">Resume ${planTitle(current)}</button><span class="small muted">Keeps the plan: nothing changes at the end of the cycle.</span></form></div>`;
  } else if (plans[current].paid) {
    status = html`<div class="card" id="plan-status"><p>You are on <strong>${planTitle(current)}</strong>. The current cycle ends ${when(options.cycleEnd)}.</p>
<form method="post" action="/dashboard/plan/cancel" class="actions">${csrf}<button type="submit" class="danger" id="cancel-plan">Cancel ${planTitle(current)}</button><span class="small muted">The plan and its remaining credits stay until the end of the cycle, then the account moves to Free. You can resume before then.</span></form></div>`;
  } else {
    status = html`<div class="card" id="plan-status"><p>You are on <strong>Free</strong>: ${plans.free.credits} credits each monthly cycle.${
      account.subscribedPlan !== 'free' && account.cancelAt
        ? html` Your cancelled ${planTitle(account.subscribedPlan)} plan ended ${when(account.cancelAt)}.`
        : ''
    }</p></div>`;
  }

  const cards = PLAN_NAMES.map((name: PlanName) => {
    const plan = plans[name];
    const offer = PLAN_OFFERS[name];
    const isCurrent = name === current;
    let action: SafeHtml;
    if (isCurrent) action = html`<p class="small"><strong>Your current plan</strong></p>`;
    else if (options.billingConfigured) {
      action = html`<form method="post" action="/dashboard/plan/change">${csrf}<input type="hidden" name="plan" value="${name}"><button type="submit" class="secondary">Switch to ${offer.title}</button></form>`;
    } else {
      action = html`<p class="small muted">An operator switches plans with:</p><pre data-plan-command="${name}">${cliPlanCommand(account.email, name)}</pre>`;
    }
    return html`<article class="plan${isCurrent ? ' current' : ''}" data-plan="${name}"${isCurrent ? html` aria-current="true"` : ''}>
<h3>${offer.title}${isCurrent ? html`<span class="badge">Current</span>` : ''}</h3>
<div><strong>${plan.credits.toLocaleString('en-US')}</strong> credits per month</div>
<div class="small">${offer.price}</div>
<div class="small">${plan.rateLimitPerMinute.toLocaleString('en-US')} requests per minute per key</div>
<ul class="small">${offer.extras.map((e) => html`<li>${e}</li>`)}<li>full-resolution output</li></ul>
<div class="bottom">${action}</div>
</article>`;
  });

  return page(
    { title: 'Plan', viewer, section: 'plan', message: options.message },
    html`<h1>Plan</h1>
${status}
${
  options.billingConfigured
    ? ''
    : html`<p class="small muted" id="billing-note">No billing provider is configured on this service: an operator changes plans with the CLI, using the command shown under each plan.</p>`
}
<div class="plans">${cards}</div>`,
  );
}

export interface CheckoutPageOptions {
  viewer: Viewer;
  /** The provider's checkout (an absolute http(s) URL, checked by checkCheckoutUrl). */
  url: string;
  plan: PlanName;
}

export function checkoutPage(options: CheckoutPageOptions): string {
  return page(
    { title: 'Checkout', viewer: options.viewer, section: 'plan' },
    html`<h1>Checkout</h1>
<div class="card"><p>Switching to ${planTitle(options.plan)} goes on at the billing provider's checkout.</p>
<p class="actions"><a class="button" id="checkout-link" href="${options.url}" data-follow>Continue to the checkout</a></p></div>`,
  );
}
