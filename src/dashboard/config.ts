/** The dashboard's environment settings, validated like the service's own (src/config.ts). */
import { ConfigError } from '../config.js';

export interface DashboardConfig {
  /**
   * BGONE_TRUST_PROXY=true: the service runs behind a TLS-terminating proxy, whose
   * X-Forwarded-Proto (cookies become Secure) and X-Forwarded-For (the client address for login
   * throttling) are believed. Otherwise both headers are ignored.
   */
  trustProxy: boolean;
}

export function loadDashboardConfig(env: NodeJS.ProcessEnv = process.env): DashboardConfig {
  const raw = env.BGONE_TRUST_PROXY;
  if (raw === undefined || raw === '' || /^(0|false|no|off)$/i.test(raw)) return { trustProxy: false };
  if (/^(1|true|yes|on)$/i.test(raw)) return { trustProxy: true };
  throw new ConfigError(`BGONE_TRUST_PROXY must be true or false (got "${raw}")`);
}
