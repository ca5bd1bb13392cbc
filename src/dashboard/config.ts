/** The dashboard's environment settings, validated like the service's own (src/config.ts). */
import { bool } from '../config.js';

export interface DashboardConfig {
  /**
   * BGONE_TRUST_PROXY=true: the service runs behind a TLS-terminating proxy, whose
   * X-Forwarded-Proto (cookies become Secure) and X-Forwarded-For (the client address for login
   * throttling) are believed. Otherwise both headers are ignored.
   */
  trustProxy: boolean;
}

export function loadDashboardConfig(env: NodeJS.ProcessEnv = process.env): DashboardConfig {
  return { trustProxy: bool(env, 'BGONE_TRUST_PROXY', false) };
}
