/** GET /dashboard: the usage page (credits, cycle, rate limit, chart); /dashboard/ redirects there. */
import { htmlReply, redirect } from '../replies.js';
import { usagePage } from '../views/usage.js';
import type { DashboardKit } from './kit.js';

export function mountUsage(kit: DashboardKit): void {
  const { store } = kit;
  kit.page('/dashboard', async (pr, signedIn) => {
    const balance = await store.credits.balance(signedIn.account.id);
    const days = await store.usage.byDay(signedIn.account.id);
    return htmlReply(
      200,
      usagePage({ viewer: kit.viewerOf(signedIn), account: signedIn.account, balance, days, now: store.clock(), message: kit.noticeOf(pr) }),
    );
  });
  kit.route('GET', '/dashboard/', () => redirect('/dashboard'));
}
