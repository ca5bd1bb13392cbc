/**
 * Service configuration from environment variables, validated at start with clear messages.
 * Every variable has an embedded default, so `npm start` needs none.
 */
export interface Config {
  host: string;
  port: number;
  databasePath: string;
  model: string | undefined;
  /** Requests admitted at once (running, queued or uploading); beyond it, 503 overloaded. */
  queueLimit: number;
  /** Seconds a client is told to wait in Retry-After on 503. */
  overloadRetryAfter: number;
  logLevel: string;
  /** Seconds SIGTERM waits for in-flight requests before exiting. */
  drainTimeout: number;
  rateLimits: { free: number; pro: number; ultra: number; mega: number };
  /** Create a local Free account and print its key when the database has no account. */
  bootstrapAccount: boolean;
}

export class ConfigError extends Error {}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new ConfigError(`${name} must be an integer from ${min} to ${max} (got "${raw}")`);
  return value;
}

/** A true/false environment variable (1/0, yes/no, on/off too); a ConfigError on anything else. */
export function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false (got "${raw}")`);
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const logLevel = env.BGONE_LOG_LEVEL ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`BGONE_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${logLevel}")`);
  const host = env.BGONE_HOST ?? env.HOST ?? '127.0.0.1';
  if (!/^[\w.:-]+$/.test(host)) throw new ConfigError(`BGONE_HOST must be a host name or IP address (got "${host}")`);
  return {
    host,
    port: int(env, env.BGONE_PORT !== undefined ? 'BGONE_PORT' : 'PORT', 8080, 0, 65535),
    databasePath: env.BGONE_DB ?? 'data/bgone.db',
    model: env.BGONE_MODEL || undefined,
    queueLimit: int(env, 'BGONE_QUEUE_LIMIT', 16, 1, 10_000),
    overloadRetryAfter: int(env, 'BGONE_OVERLOAD_RETRY_AFTER', 5, 1, 3600),
    logLevel,
    drainTimeout: int(env, 'BGONE_DRAIN_TIMEOUT', 30, 0, 3600),
    rateLimits: {
      free: int(env, 'BGONE_RATE_LIMIT_FREE', 10, 1, 1_000_000),
      pro: int(env, 'BGONE_RATE_LIMIT_PRO', 60, 1, 1_000_000),
      ultra: int(env, 'BGONE_RATE_LIMIT_ULTRA', 300, 1, 1_000_000),
      mega: int(env, 'BGONE_RATE_LIMIT_MEGA', 1000, 1, 1_000_000),
    },
    bootstrapAccount: bool(env, 'BGONE_BOOTSTRAP_ACCOUNT', true),
  };
}
