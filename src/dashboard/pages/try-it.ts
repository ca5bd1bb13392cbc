/**
 * The try-it panel: GET /dashboard/try (the page), POST /dashboard/try (multipart, session +
 * X-CSRF-Token), which answers in the API's JSON through the API's own admission and removal path.
 */
import { SESSION_COOKIE } from '../cookies.js';
import { htmlReply } from '../replies.js';
import { pageRequest } from '../request.js';
import type { TryEndpoint } from '../try-endpoint.js';
import { tryPage } from '../views/try.js';
import type { DashboardKit } from './kit.js';

export function mountTryIt(kit: DashboardKit, tryEndpoint: TryEndpoint): void {
  const { store, sessions, trustProxy } = kit;
  kit.page('/dashboard/try', async (_pr, signedIn) =>
    htmlReply(200, tryPage({ viewer: kit.viewerOf(signedIn), balance: await store.credits.balance(signedIn.account.id) })),
  );
  kit.router.post(
    '/dashboard/try',
    (ex) => tryEndpoint.handle(ex, () => sessions.current(pageRequest(ex, trustProxy).cookies.get(SESSION_COOKIE))),
    kit.fallback,
  );
}
