/**
 * The plan page: GET /dashboard/plan, POST /dashboard/plan/cancel, /resume and /change (a checkout
 * link from the billing provider, or the operator's CLI command when none is configured).
 */
import { isPlanName, StoreError } from '../../store/index.js';
import { type BillingProvider, checkCheckoutUrl, cliPlanCommand } from '../billing.js';
import { PLAN_OFFERS } from '../catalog.js';
import { htmlReply, type Reply, redirect } from '../replies.js';
import type { SignedIn } from '../sessions.js';
import type { Message } from '../views/layout.js';
import { checkoutPage, planPage } from '../views/plan.js';
import type { DashboardKit } from './kit.js';

export function mountPlans(kit: DashboardKit, billing: BillingProvider | null): void {
  const { store, logger, viewerOf } = kit;

  async function renderPlan(status: number, signedIn: SignedIn, message: Message | null): Promise<Reply> {
    const balance = await store.credits.balance(signedIn.account.id);
    const account = (await store.accounts.get(signedIn.account.id)) ?? signedIn.account;
    return htmlReply(
      status,
      planPage({
        viewer: viewerOf(signedIn),
        account,
        plans: store.plans,
        cycleEnd: balance.cycleEnd,
        now: store.clock(),
        billingConfigured: billing !== null,
        message,
      }),
    );
  }

  kit.page('/dashboard/plan', (pr, signedIn) => renderPlan(200, signedIn, kit.noticeOf(pr)));

  kit.action('/dashboard/plan/cancel', [], async (_pr, signedIn) => {
    try {
      await store.accounts.cancel(signedIn.account.id);
    } catch (err) {
      if (err instanceof StoreError && err.code === 'invalid_state')
        return renderPlan(400, signedIn, { kind: 'error', text: 'The Free plan cannot be cancelled.' });
      throw err;
    }
    return redirect('/dashboard/plan?done=plan-cancelled');
  });

  kit.action('/dashboard/plan/resume', [], async (_pr, signedIn) => {
    try {
      await store.accounts.resume(signedIn.account.id);
    } catch (err) {
      if (err instanceof StoreError && err.code === 'invalid_state') {
        return renderPlan(400, signedIn, { kind: 'error', text: 'The cancellation already took effect at the end of the cycle; choose a plan again.' });
      }
      throw err;
    }
    return redirect('/dashboard/plan?done=plan-resumed');
  });

  kit.action('/dashboard/plan/change', ['plan'], async (_pr, signedIn, form) => {
    const plan = form.get('plan');
    if (!isPlanName(plan)) return renderPlan(400, signedIn, { kind: 'error', text: 'Unknown plan.' });
    if (plan === signedIn.account.plan) return renderPlan(400, signedIn, { kind: 'error', text: `You are already on ${PLAN_OFFERS[plan].title}.` });
    if (!billing) {
      return renderPlan(400, signedIn, {
        kind: 'error',
        text: `No billing provider is configured: an operator changes the plan with "${cliPlanCommand(signedIn.account.email, plan)}".`,
      });
    }
    let url: string;
    try {
      url = checkCheckoutUrl(await billing.checkoutUrl(signedIn.account, plan));
    } catch (err) {
      logger?.error({ err, accountId: signedIn.account.id }, 'billing provider failed');
      return renderPlan(502, signedIn, { kind: 'error', text: 'The billing provider could not start the checkout. Try again later.' });
    }
    // A page with a link, not a redirect: the CSP's form-action 'self' also covers the redirects
    // that follow a form post, so browsers would block a 303 from this form to another origin.
    return htmlReply(200, checkoutPage({ viewer: viewerOf(signedIn), url, plan }));
  });
}
