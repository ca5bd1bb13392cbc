/**
 * The service's defaults, written once. loadConfig (config.ts) falls back on them for every unset
 * environment variable, and startServer (src/server.ts) for every option its caller leaves out
 * (tests, benches), so that `npm start` and a server started in code behave alike. A default that
 * changes changes here; the variable each one stands for is named beside it.
 */

export const SERVICE_DEFAULTS = {
  /** BGONE_QUEUE_LIMIT: requests whose body has arrived (running or queued) at once. */
  queueLimit: 16,
  /** BGONE_OVERLOAD_RETRY_AFTER: seconds in Retry-After on 503 (and 429 for the in-flight cap). */
  overloadRetryAfterSeconds: 5,
  /** BGONE_DRAIN_TIMEOUT: seconds SIGTERM waits for admitted requests. */
  drainTimeoutSeconds: 30,
  /** BGONE_BODY_TIMEOUT: seconds an admitted request's whole body may take to arrive. */
  bodyTimeoutSeconds: 60,
  /** BGONE_ACCOUNT_IN_FLIGHT: admitted requests one account may hold at once on a node. */
  accountInFlight: 4,
  /**
   * BGONE_ACCOUNT_READ_RATE_LIMIT: reads of an account's balance (the dialects' account routes) per
   * minute, per key and per account, whatever the plan; counted apart from the plan's rate limit.
   */
  accountReadsPerMinute: 120,
  /** BGONE_UPLOAD_LIMIT: requests whose body is still arriving at once. */
  uploadLimit: 64,
  /** BGONE_BODY_MIN_RATE: 16 KiB a second, the throughput uWS itself asks of an upload (it closes slower ones after 10 s). */
  bodyMinRateBytesPerSecond: 16 * 1024,
  /** The window over which the minimum rate is counted (no variable: the rate is what operators tune). */
  bodyRateWindowMs: 10_000,
  /** BGONE_MEMORY_BUDGET_MB: the estimated peak memory of the jobs admitted at once (the job memory gate). */
  memoryBudgetMb: 2048,
  /** BGONE_MEMORY_WAIT: seconds a job may wait for memory before it is refused with 503. */
  memoryWaitSeconds: 30,
  /** BGONE_FETCH_ALLOW_PRIVATE: image URLs leading to private addresses refused (BGONE_FETCH_ALLOW, empty by default, opens some). */
  fetchAllowPrivate: false,
  /** BGONE_CORS_ORIGINS: pages of any origin may call the API's routes, as remove.bg allows. */
  corsOrigins: '*' as CorsOrigins,
} as const;

export const BATCH_DEFAULTS = {
  /** BGONE_BATCH_RESULT_TTL: seconds results are kept. */
  resultTtlSeconds: 3600,
  /** BGONE_BATCH_MEMORY_MB: the batch memory budget (queued images and kept results). */
  memoryMb: 1024,
  /** BGONE_BATCH_ACCOUNT_SHARE: the percentage of the batch memory one account may hold. */
  accountSharePercent: 25,
  /** BGONE_WEBHOOK_ALLOW_PRIVATE: webhooks to private addresses refused. */
  webhookAllowPrivate: false,
  /** BGONE_WEBHOOK_RETENTION: seconds ended webhook deliveries are kept. */
  webhookRetentionSeconds: 7 * 24 * 3600,
} as const;

/** BGONE_CORS_ORIGINS: '*' (any page), the origins (`scheme://host[:port]`, lower case) whose pages may call the API, or 'off'. */
export type CorsOrigins = '*' | 'off' | readonly string[];

/** BGONE_HTTP: which HTTP backend serves ('auto', the default: node:http; 'uws': uWebSockets.js). */
export type BackendChoice = 'auto' | 'uws' | 'node';

/** BGONE_CLUSTER_SECRET: shorter secrets are refused, a guessable one would open every node's images. */
export const MIN_CLUSTER_SECRET_LENGTH = 32;
