/** The dashboard: sign-up, keys, usage, plan and try-it pages served by the service under /dashboard. */
export { type BillingProvider, cliPlanCommand } from './billing.js';
export { DEFAULT_LOGIN_LIMITS, type LoginLimits } from './login-limiter.js';
export type { ScryptParams } from './passwords.js';
export { type DashboardDeps, mountDashboard } from './routes.js';
