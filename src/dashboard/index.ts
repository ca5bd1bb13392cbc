/** The dashboard: sign-up, keys, webhooks, usage, plan and try-it pages served by the service under /dashboard. */

export { DEFAULT_LOGIN_LIMITS, type LoginLimits } from '../store/index.js';
export { type BillingProvider, cliPlanCommand } from './billing.js';
export type { ScryptParams } from './passwords.js';
export { type DashboardDeps, mountDashboard } from './routes.js';
