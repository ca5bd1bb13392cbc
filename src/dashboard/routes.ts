/**
 * The dashboard's routes on the service's router (any HTTP backend), under /dashboard:
 *
 *   GET  /dashboard                  usage (credits, cycle, rate limit, chart)
 *   GET  /dashboard/signup, /login   forms;  POST the same paths to sign up / log in
 *   POST /dashboard/logout
 *   GET  /dashboard/keys             list;   POST /dashboard/keys (create), /dashboard/keys/revoke
 *   GET  /dashboard/webhooks         endpoints and their deliveries;
 *                                    POST /dashboard/webhooks (create), /dashboard/webhooks/delete, /test
 *   GET  /dashboard/plan             plans;  POST /dashboard/plan/cancel, /resume, /change
 *   GET  /dashboard/try              panel;  POST /dashboard/try (multipart, session + X-CSRF-Token)
 *   GET  /dashboard/assets/*         the stylesheet and the script
 *
 * Each page's routes live in pages/ (one module per page, mounted here in this order with the kit
 * of pages/kit.ts); views/ renders them. All state lives in the store (accounts, keys, credits,
 * plans, sessions); pages are rendered on the server from it. Every POST form carries a CSRF
 * token; every page is no-store with a strict CSP.
 *
 * With sign-up switched off (BGONE_SIGNUP=false), GET and POST /dashboard/signup answer 403 with a
 * page saying so, and create nothing.
 */

import type { Logger } from '../config/logger.js';
import type { ServiceContext } from '../service/context.js';
import { DEFAULT_LOGIN_LIMITS, type LoginLimits, type Store } from '../store/index.js';
import { AuthService, DEFAULT_SIGNUPS_PER_IP_PER_HOUR } from './auth.js';
import type { BillingProvider } from './billing.js';
import { PreLoginCsrf } from './csrf.js';
import { mountAssets } from './pages/assets.js';
import { mountAuth } from './pages/auth.js';
import { mountKeys } from './pages/keys.js';
import { dashboardKit } from './pages/kit.js';
import { mountPlans } from './pages/plans.js';
import { mountTryIt } from './pages/try-it.js';
import { mountUsage } from './pages/usage.js';
import { mountWebhooks } from './pages/webhooks.js';
import { PasswordHasher, type PasswordWorkLimits, type ScryptParams } from './passwords.js';
import { SessionManager } from './sessions.js';
import { TryEndpoint } from './try-endpoint.js';

export interface DashboardDeps {
  store: Store;
  logger?: Logger | undefined;
  /** The model of the try-it panel (default: the manifest's default, as the API). */
  model?: string | undefined;
  /** Checkout for plan changes; none: the plan page shows the operator's CLI command. */
  billing?: BillingProvider | null;
  /** Believe X-Forwarded-Proto / X-Forwarded-For (BGONE_TRUST_PROXY=true). Default false. */
  trustProxy?: boolean;
  loginLimits?: LoginLimits;
  /** scrypt cost (default N=2^15, r=8, p=1). */
  scrypt?: ScryptParams;
  /** Bounds on concurrent scrypt work (default: 1 at a time, 8 waiting, then a 503 page). */
  passwordWork?: Partial<PasswordWorkLimits>;
  /** The hasher itself (then `scrypt` and `passwordWork` are its own): tests watch its work. */
  passwordHasher?: PasswordHasher;
  /** BGONE_SIGNUP: false closes sign-up (a 403 page, nothing created). Default true. */
  signup?: boolean;
  /** BGONE_SIGNUP_PER_IP_PER_HOUR: sign-ups per client address per hour, successful ones included. Default 5. */
  signupsPerIpPerHour?: number;
  /** BGONE_WEBHOOK_ALLOW_PRIVATE: accept http:// and private-address webhook URLs. Default false. */
  webhookAllowPrivate?: boolean;
  /** Called once a test event is in the outbox, so that the delivery worker can look at once. */
  onWebhookTest?: () => void;
}

export function mountDashboard(context: ServiceContext, deps: DashboardDeps): void {
  const { router, admission, metrics } = context;
  const { store, logger } = deps;
  const sessions = new SessionManager(store);
  const hasher = deps.passwordHasher ?? new PasswordHasher(deps.scrypt, deps.passwordWork);
  const auth = new AuthService(store, deps.loginLimits ?? DEFAULT_LOGIN_LIMITS, hasher, deps.signupsPerIpPerHour ?? DEFAULT_SIGNUPS_PER_IP_PER_HOUR);
  const tryEndpoint = new TryEndpoint({ store, model: deps.model, metrics, logger, admission, memory: context.memory });
  const kit = dashboardKit(router, store, logger, sessions, deps.trustProxy ?? false);
  router.group('/dashboard/', kit.fallback);

  mountUsage(kit);
  // Keyed by the store's server key: every node on one database accepts the forms of any other.
  const preLogin = new PreLoginCsrf(() => store.serverKey());
  preLogin.preload();
  mountAuth(kit, { auth, preLogin, signupOpen: deps.signup ?? true });
  mountKeys(kit);
  mountWebhooks(kit, { webhookAllowPrivate: deps.webhookAllowPrivate ?? false, onWebhookTest: deps.onWebhookTest });
  mountPlans(kit, deps.billing ?? null);
  mountTryIt(kit, tryEndpoint);
  mountAssets(kit);
}
