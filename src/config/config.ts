/**
 * The one configuration: every environment variable bgone reads (the service's, the dashboard's
 * and the library's) is read and validated here, when a command starts, never at import time.
 * A bad value is a ConfigError naming the variable. Every variable has an embedded default, so
 * `npm start` needs none; the service's are in defaults.ts, shared with startServer.
 */
import { statSync } from 'node:fs';
import { FETCH_ALLOW_GRAMMAR, parseFetchAllow } from '../lib/address-guard.js';
import {
  ADDON_BUILDS,
  type AddonBuild,
  DEFAULT_SETTINGS,
  EXECUTION_PROVIDER_GRAMMAR,
  type ExecutionProvider,
  parseExecutionProvider,
} from '../lib/settings.js';
import { BATCH_DEFAULTS, type BackendChoice, type CorsOrigins, MIN_CLUSTER_SECRET_LENGTH, SERVICE_DEFAULTS } from './defaults.js';

/** The library's settings (applied with the library's configure()). */
export interface LibraryConfig {
  /** BGONE_MODELS_DIR: where models/manifest.json and the weights are (default: the package's models/). */
  modelsDir: string | undefined;
  /** BGONE_INFERENCE_THREADS: ONNX Runtime intra-op threads (0: one per core). */
  inferenceThreads: number;
  /** BGONE_NATIVE_CONCURRENCY: jobs inside the native core at once (0: 2 on the CPU, one per core from 4 to 16 on a GPU). */
  nativeConcurrency: number;
  /**
   * BGONE_EXECUTION_PROVIDER: 'cpu' (default), 'cuda[:<device id>]', 'tensorrt[:<device id>]',
   * 'webgpu', or an ordered fall-back list of them such as 'webgpu,cpu'.
   */
  executionProvider: ExecutionProvider;
  /** BGONE_CUDA_MEM_LIMIT_MB: with CUDA or TensorRT, the most GPU memory ONNX Runtime's arena takes (MiB); 0: no limit. */
  cudaMemLimitMb: number;
  /**
   * BGONE_TENSORRT_CACHE_DIR: with TensorRT, the folder of its engine and timing caches; 'off': none;
   * undefined (unset): the library's default.
   */
  tensorrtCacheDir: string | undefined;
  /**
   * BGONE_WEBGPU_CPU_ADAPTER=true: with WebGPU, a CPU Vulkan device (SwiftShader) may run the models
   * where the loader lists no GPU: for checking the route on a machine without one.
   */
  webgpuCpuAdapter: boolean;
  /** BGONE_ORT_LIBRARY: the ONNX Runtime shared library to open (default: onnxruntime-node's, CPU only). */
  onnxRuntimeLibrary: string | undefined;
  /** BGONE_ADDON_BUILD: 'auto' (default: the AVX2 build where the CPU runs it) or 'baseline'. */
  addonBuild: AddonBuild;
  /**
   * BGONE_FETCH_ALLOW_PRIVATE=true: image URLs (image_url, bg_image_url) may lead to loopback,
   * private, link-local and metadata addresses (local setups, tests).
   */
  fetchAllowPrivate: boolean;
  /**
   * BGONE_FETCH_ALLOW: the hosts and networks image URLs may reach although they are private
   * (comma-separated host names, *.domain wildcards, CIDRs and addresses; the library's fetchAllow),
   * normalised. Metadata addresses stay refused unless listed as that exact address.
   */
  fetchAllow: readonly string[];
  /** BGONE_MODEL_IDLE_SECONDS: seconds an unused model stays loaded (0: for good); the served default stays loaded. */
  modelIdleSeconds: number;
  /** BGONE_MODELS_MEMORY_MB: MiB the loaded models may hold together (0: no limit). */
  modelsMemoryMb: number;
  /** BGONE_INFERENCE_TIMEOUT: seconds one model run may take before it is stopped and its job fails (0: no limit). */
  inferenceTimeout: number;
}

/** BGONE_DATABASE_URL and its settings: the shared PostgreSQL ledger of several nodes. */
export interface PostgresConfig {
  url: string;
  /** BGONE_DATABASE_POOL_SIZE: connections per node. */
  poolSize: number;
  /** BGONE_DATABASE_STATEMENT_TIMEOUT_MS: a statement running longer is cancelled. */
  statementTimeoutMs: number;
  /** BGONE_NODE_HEARTBEAT_LAPSE_MS: after this long without a heartbeat a node counts as dead. */
  heartbeatLapseMs: number;
  /** BGONE_KEY_CACHE_MS: how long a node keeps what it read of a valid API key (0: read every time). */
  keyCacheMs: number;
  /**
   * BGONE_CLUSTER_SECRET: what nodes present to each other's internal routes (at least 32
   * characters). Set on every node of several: batches are then answered by any node and their
   * work spread; unset, a node keeps its batches to itself, as one node does (and refuses to start
   * beside nodes that have it: serve.ts).
   */
  clusterSecret: string | undefined;
  /**
   * BGONE_CLUSTER_SECRET_PREVIOUS: during a rotation, the secret being replaced, still accepted on
   * the internal routes and presented to a peer that refuses the current one.
   */
  clusterSecretPrevious: string | undefined;
  /** BGONE_INTERNAL_URL: where the other nodes reach this one (default: its listen address). */
  internalUrl: string | undefined;
}

/** Async batches and their webhooks (docs/contract.md, "Async batches and webhooks"). */
export interface BatchConfig {
  /** BGONE_PUBLIC_URL: the base of result_url in events (default: the address the service listens on). */
  publicUrl: string | undefined;
  /** BGONE_BATCH_RESULT_TTL (seconds): how long results are kept in memory. */
  resultTtlSeconds: number;
  /** BGONE_BATCH_MEMORY_MB: bytes held by queued images and results, in MiB; beyond it new batches get 503. */
  memoryMb: number;
  /** BGONE_BATCH_ACCOUNT_SHARE: the percentage of that memory one account may hold; beyond it its new batches get 429. */
  accountSharePercent: number;
  /** BGONE_WEBHOOK_ALLOW_PRIVATE=true: http:// and private, loopback or link-local addresses allowed (local setups, tests). */
  webhookAllowPrivate: boolean;
  /** BGONE_WEBHOOK_RETENTION (seconds): delivered and failed webhook deliveries are deleted this long after they ended. */
  webhookRetentionSeconds: number;
}

/** The dashboard's sign-up form. */
export interface SignupConfig {
  /** BGONE_SIGNUP=false: the sign-up page says sign-up is closed (403) and creates nothing. */
  enabled: boolean;
  /** BGONE_SIGNUP_PER_IP_PER_HOUR: sign-ups per client address per hour, successful ones included; beyond it 429. */
  perIpPerHour: number;
}

export interface Config {
  host: string;
  port: number;
  databasePath: string;
  /** Set (BGONE_DATABASE_URL): the store is PostgreSQL and databasePath is not used. */
  postgres: PostgresConfig | undefined;
  model: string | undefined;
  /** BGONE_MODELS_ALLOWED: model names a request may choose besides the default (comma-separated), or 'all'. */
  modelsAllowed: readonly string[] | 'all';
  /** Requests whose body has arrived (running or queued) at once; at it, new ones get 503 overloaded. */
  queueLimit: number;
  /** Seconds a client is told to wait in Retry-After on 503 (and on 429 for the per-account in-flight cap). */
  overloadRetryAfter: number;
  /** BGONE_BODY_TIMEOUT: seconds an admitted request's whole body may take to arrive; then 408 and the connection closed. */
  bodyTimeout: number;
  /** BGONE_ACCOUNT_IN_FLIGHT: admitted requests one account may hold at once on a node; beyond it 429. */
  accountInFlight: number;
  /** BGONE_ACCOUNT_READ_RATE_LIMIT: account reads (balance routes) per minute, per key and per account, apart from the plan's limit. */
  accountReadsPerMinute: number;
  /** BGONE_UPLOAD_LIMIT: requests whose body is still arriving at once; beyond it 503 (queueLimit counts the others). */
  uploadLimit: number;
  /** BGONE_BODY_MIN_RATE: bytes a second a body must bring, counted over 10 s windows (0: no minimum); less is 408. */
  bodyMinRate: number;
  /** BGONE_MAX_KEYS_PER_ACCOUNT: active (unrevoked) API keys an account may hold. */
  maxKeysPerAccount: number;
  /** BGONE_MEMORY_BUDGET_MB: the estimated peak memory of the jobs admitted at once, in MiB. */
  memoryBudgetMb: number;
  /** BGONE_MEMORY_WAIT: seconds a job may wait for memory before it is refused with 503. */
  memoryWait: number;
  logLevel: string;
  /** Seconds SIGTERM waits for in-flight requests before exiting. */
  drainTimeout: number;
  rateLimits: { free: number; pro: number; ultra: number; mega: number };
  /** Create a local Free account and print its key when the database has no account. */
  bootstrapAccount: boolean;
  /** BGONE_HTTP: the HTTP backend ('auto', the default: node:http; 'uws': uWebSockets.js, which must load). */
  http: BackendChoice;
  /**
   * BGONE_TRUST_PROXY=true: the service runs behind a TLS-terminating proxy, whose
   * X-Forwarded-Proto (cookies become Secure) and X-Forwarded-For (the client address for login
   * throttling) are believed. Otherwise both headers are ignored.
   */
  trustProxy: boolean;
  /**
   * BGONE_CORS_ORIGINS: which pages of other origins may call the API's routes (docs/api.md, "CORS"):
   * '*' (default), the origins listed (normalised: lower case, no default port), or 'off'.
   */
  corsOrigins: CorsOrigins;
  /** The dashboard's sign-up (docs/contract.md, "Abuse limits"). */
  signup: SignupConfig;
  batches: BatchConfig;
  library: LibraryConfig;
  metrics: MetricsConfig;
}

/** Where GET /metrics is served (docs/operations.md, "Metrics"). */
export interface MetricsConfig {
  /** BGONE_METRICS_LISTEN: host:port of a listener serving only /metrics (default 127.0.0.1:9464); `off`: none. */
  listen: { host: string; port: number } | undefined;
  /** BGONE_METRICS_TOKEN: the public port also serves /metrics to `Authorization: Bearer <token>` (at least 16 characters). */
  token: string | undefined;
}

export const DEFAULT_METRICS_LISTEN = '127.0.0.1:9464';
const METRICS_TOKEN_MIN_LENGTH = 16;

function loadMetricsConfig(env: NodeJS.ProcessEnv): MetricsConfig {
  const raw = env.BGONE_METRICS_LISTEN || DEFAULT_METRICS_LISTEN;
  let listen: MetricsConfig['listen'];
  if (raw !== 'off') {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([\w.-]+)):(\d{1,5})$/.exec(raw);
    const port = Number(m?.[3]);
    if (!m || port > 65535) throw new ConfigError(`BGONE_METRICS_LISTEN must be host:port, [ipv6]:port or off (got "${raw}")`);
    listen = { host: (m[1] ?? m[2])!, port };
  }
  const token = env.BGONE_METRICS_TOKEN || undefined;
  if (token !== undefined && (token.length < METRICS_TOKEN_MIN_LENGTH || /[^\x21-\x7e]/.test(token)))
    throw new ConfigError(`BGONE_METRICS_TOKEN must be at least ${METRICS_TOKEN_MIN_LENGTH} visible ASCII characters`);
  return { listen, token };
}

export class ConfigError extends Error {}

export const DEFAULT_DATABASE_PATH = 'data/bgone.db';

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

/**
 * An optional base URL (BGONE_PUBLIC_URL, BGONE_INTERNAL_URL): http:// or https://, without query
 * or fragment, and without user or password where `credentials` is 'refused'; returned without its
 * trailing slashes, since paths are appended to it. A ConfigError naming the variable otherwise.
 */
function baseUrl(env: NodeJS.ProcessEnv, name: string, credentials: 'allowed' | 'refused'): string | undefined {
  const raw = env[name] || undefined;
  if (raw === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(raw);
  } catch {}
  const refusedCredentials = credentials === 'refused' && (parsed?.username || parsed?.password);
  if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.search || parsed.hash || refusedCredentials)
    throw new ConfigError(`${name} must be an http:// or https:// URL without ${credentials === 'refused' ? 'credentials or query' : 'query'} (got "${raw}")`);
  return raw.replace(/\/+$/, '');
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * The service's admission and memory limits as startServer takes them: what `bgone serve` starts
 * with, and what a benchmark of the service's behaviour under load starts with too.
 */
export function serviceLimits(config: Config) {
  return {
    queueLimit: config.queueLimit,
    overloadRetryAfter: config.overloadRetryAfter,
    bodyTimeout: config.bodyTimeout,
    accountInFlight: config.accountInFlight,
    accountReadsPerMinute: config.accountReadsPerMinute,
    uploadLimit: config.uploadLimit,
    bodyMinRate: { bytesPerSecond: config.bodyMinRate },
    memory: { budgetMb: config.memoryBudgetMb, waitSeconds: config.memoryWait },
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const logLevel = env.BGONE_LOG_LEVEL ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`BGONE_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${logLevel}")`);
  const host = env.BGONE_HOST ?? env.HOST ?? '127.0.0.1';
  if (!/^[\w.:-]+$/.test(host)) throw new ConfigError(`BGONE_HOST must be a host name or IP address (got "${host}")`);
  // One node on SQLite has no peers: a secret there would suggest a cluster that is not running.
  if (!env.BGONE_DATABASE_URL && (env.BGONE_CLUSTER_SECRET || env.BGONE_CLUSTER_SECRET_PREVIOUS || env.BGONE_INTERNAL_URL))
    throw new ConfigError(
      'BGONE_CLUSTER_SECRET, BGONE_CLUSTER_SECRET_PREVIOUS and BGONE_INTERNAL_URL are for several nodes on PostgreSQL: set BGONE_DATABASE_URL, or leave them out',
    );
  return {
    host,
    port: int(env, env.BGONE_PORT !== undefined ? 'BGONE_PORT' : 'PORT', 8080, 0, 65535),
    databasePath: databasePath(env),
    postgres: loadPostgresConfig(env),
    model: env.BGONE_MODEL || undefined,
    modelsAllowed: modelsAllowed(env),
    queueLimit: int(env, 'BGONE_QUEUE_LIMIT', SERVICE_DEFAULTS.queueLimit, 1, 10_000),
    overloadRetryAfter: int(env, 'BGONE_OVERLOAD_RETRY_AFTER', SERVICE_DEFAULTS.overloadRetryAfterSeconds, 1, 3600),
    bodyTimeout: int(env, 'BGONE_BODY_TIMEOUT', SERVICE_DEFAULTS.bodyTimeoutSeconds, 1, 3600),
    accountInFlight: int(env, 'BGONE_ACCOUNT_IN_FLIGHT', SERVICE_DEFAULTS.accountInFlight, 1, 10_000),
    accountReadsPerMinute: int(env, 'BGONE_ACCOUNT_READ_RATE_LIMIT', SERVICE_DEFAULTS.accountReadsPerMinute, 1, 1_000_000),
    uploadLimit: int(env, 'BGONE_UPLOAD_LIMIT', SERVICE_DEFAULTS.uploadLimit, 1, 100_000),
    bodyMinRate: int(env, 'BGONE_BODY_MIN_RATE', SERVICE_DEFAULTS.bodyMinRateBytesPerSecond, 0, 1_073_741_824),
    maxKeysPerAccount: maxKeysPerAccount(env),
    memoryBudgetMb: int(env, 'BGONE_MEMORY_BUDGET_MB', SERVICE_DEFAULTS.memoryBudgetMb, 64, 1_048_576),
    memoryWait: int(env, 'BGONE_MEMORY_WAIT', SERVICE_DEFAULTS.memoryWaitSeconds, 1, 3600),
    logLevel,
    drainTimeout: int(env, 'BGONE_DRAIN_TIMEOUT', SERVICE_DEFAULTS.drainTimeoutSeconds, 0, 3600),
    rateLimits: {
      free: int(env, 'BGONE_RATE_LIMIT_FREE', 10, 1, 1_000_000),
      pro: int(env, 'BGONE_RATE_LIMIT_PRO', 60, 1, 1_000_000),
      ultra: int(env, 'BGONE_RATE_LIMIT_ULTRA', 300, 1, 1_000_000),
      mega: int(env, 'BGONE_RATE_LIMIT_MEGA', 1000, 1, 1_000_000),
    },
    bootstrapAccount: bool(env, 'BGONE_BOOTSTRAP_ACCOUNT', true),
    http: httpChoice(env),
    trustProxy: bool(env, 'BGONE_TRUST_PROXY', false),
    corsOrigins: corsOrigins(env),
    signup: {
      enabled: bool(env, 'BGONE_SIGNUP', true),
      perIpPerHour: int(env, 'BGONE_SIGNUP_PER_IP_PER_HOUR', 5, 1, 1_000_000),
    },
    batches: loadBatchConfig(env),
    library: loadLibraryConfig(env),
    metrics: loadMetricsConfig(env),
  };
}

/** BGONE_MODELS_ALLOWED: `all`, or comma-separated model names (checked against the manifests per request). */
function modelsAllowed(env: NodeJS.ProcessEnv): readonly string[] | 'all' {
  const raw = (env.BGONE_MODELS_ALLOWED ?? '').trim();
  if (raw === 'all') return 'all';
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = names.find((n) => !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(n));
  if (bad !== undefined) throw new ConfigError(`BGONE_MODELS_ALLOWED must be "all" or comma-separated model names (got "${bad}")`);
  return names;
}

const CORS_GRAMMAR = '*, off, or comma-separated origins (scheme://host[:port], http or https, without a path)';

/** Why `entry` is not an origin a page can have, or its normal form (what a browser sends as Origin). */
function corsOrigin(entry: string): { origin: string } | { problem: string } {
  if (entry === '*' || entry.toLowerCase() === 'off') return { problem: 'stands alone: * and off are the whole value, never one of a list' };
  if (entry.toLowerCase() === 'null') return { problem: 'is the origin of sandboxed and file pages, which cannot be listed (use * for them)' };
  const m = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/i.exec(entry);
  if (!m) return { problem: 'is not scheme://host[:port]' };
  if (!/^https?$/i.test(m[1]!)) return { problem: 'is not http:// or https://' };
  if (/[/?#]/.test(m[2]!)) return { problem: 'has a path, query or fragment (an origin is scheme://host[:port], not even a trailing /)' };
  if (m[2]!.includes('@')) return { problem: 'has credentials' };
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return { problem: 'is not a valid origin' };
  }
  return { origin: url.origin };
}

/** BGONE_CORS_ORIGINS: *, off or a list of origins (each validated, normalised as browsers send them). */
function corsOrigins(env: NodeJS.ProcessEnv): CorsOrigins {
  const raw = (env.BGONE_CORS_ORIGINS ?? '').trim();
  if (raw === '') return SERVICE_DEFAULTS.corsOrigins;
  if (raw === '*') return '*';
  if (raw.toLowerCase() === 'off') return 'off';
  const entries = raw.split(',').map((e) => e.trim());
  const origins: string[] = [];
  for (const [i, entry] of entries.entries()) {
    const where = entries.length === 1 ? 'the entry' : `entry ${i + 1} of ${entries.length}`;
    const parsed = entry === '' ? { problem: 'is empty' } : corsOrigin(entry);
    if ('problem' in parsed)
      throw new ConfigError(`BGONE_CORS_ORIGINS must be ${CORS_GRAMMAR}: ${where}${entry ? `, "${entry}",` : ''} ${parsed.problem} (got "${raw}")`);
    if (!origins.includes(parsed.origin)) origins.push(parsed.origin);
  }
  return origins;
}

function httpChoice(env: NodeJS.ProcessEnv): BackendChoice {
  const raw = env.BGONE_HTTP ?? '';
  if (raw === '' || raw === 'auto') return 'auto';
  if (raw === 'uws' || raw === 'node') return raw;
  throw new ConfigError(`BGONE_HTTP must be uws, node or auto (got "${raw}")`);
}

function loadBatchConfig(env: NodeJS.ProcessEnv): BatchConfig {
  return {
    publicUrl: baseUrl(env, 'BGONE_PUBLIC_URL', 'allowed'),
    resultTtlSeconds: int(env, 'BGONE_BATCH_RESULT_TTL', BATCH_DEFAULTS.resultTtlSeconds, 1, 7 * 24 * 3600),
    memoryMb: int(env, 'BGONE_BATCH_MEMORY_MB', BATCH_DEFAULTS.memoryMb, 16, 1_048_576),
    accountSharePercent: int(env, 'BGONE_BATCH_ACCOUNT_SHARE', BATCH_DEFAULTS.accountSharePercent, 1, 100),
    webhookAllowPrivate: bool(env, 'BGONE_WEBHOOK_ALLOW_PRIVATE', BATCH_DEFAULTS.webhookAllowPrivate),
    webhookRetentionSeconds: int(env, 'BGONE_WEBHOOK_RETENTION', BATCH_DEFAULTS.webhookRetentionSeconds, 60, 365 * 24 * 3600),
  };
}

/** The library's part alone: what `bgone remove` needs without the service. */
export function loadLibraryConfig(env: NodeJS.ProcessEnv = process.env): LibraryConfig {
  const executionProvider = executionProviderChoice(env);
  const cudaMemLimitMb = int(env, 'BGONE_CUDA_MEM_LIMIT_MB', 0, 1, 1_048_576);
  if (cudaMemLimitMb > 0 && !/\b(cuda|tensorrt)\b/.test(executionProvider))
    throw new ConfigError(
      'BGONE_CUDA_MEM_LIMIT_MB applies to CUDA and TensorRT only: set BGONE_EXECUTION_PROVIDER=cuda (or cuda:<device id>, tensorrt) with it',
    );
  const tensorrtCacheDir = tensorrtCacheDirChoice(env, executionProvider);
  const webgpuCpuAdapter = bool(env, 'BGONE_WEBGPU_CPU_ADAPTER', false);
  if (webgpuCpuAdapter && !/\bwebgpu\b/.test(executionProvider))
    throw new ConfigError('BGONE_WEBGPU_CPU_ADAPTER applies to WebGPU only: set BGONE_EXECUTION_PROVIDER=webgpu with it');
  return {
    modelsDir: env.BGONE_MODELS_DIR || undefined,
    inferenceThreads: int(env, 'BGONE_INFERENCE_THREADS', 0, 0, 256),
    nativeConcurrency: int(env, 'BGONE_NATIVE_CONCURRENCY', 0, 0, 64),
    executionProvider,
    cudaMemLimitMb,
    tensorrtCacheDir,
    webgpuCpuAdapter,
    onnxRuntimeLibrary: onnxRuntimeLibrary(env),
    addonBuild: addonBuildChoice(env),
    ...fetchRules(env),
    modelIdleSeconds: int(env, 'BGONE_MODEL_IDLE_SECONDS', 600, 0, 365 * 24 * 3600),
    modelsMemoryMb: int(env, 'BGONE_MODELS_MEMORY_MB', 0, 0, 1_048_576),
    inferenceTimeout: int(env, 'BGONE_INFERENCE_TIMEOUT', DEFAULT_SETTINGS.inferenceTimeout, 0, 86_400),
  };
}

/**
 * BGONE_FETCH_ALLOW_PRIVATE and BGONE_FETCH_ALLOW, in the library's grammar (address-guard.ts
 * parseFetchAllow) so that the two can never disagree. Both at once are refused: the first opens
 * every address, so the list would change nothing.
 */
function fetchRules(env: NodeJS.ProcessEnv): Pick<LibraryConfig, 'fetchAllowPrivate' | 'fetchAllow'> {
  const fetchAllowPrivate = bool(env, 'BGONE_FETCH_ALLOW_PRIVATE', SERVICE_DEFAULTS.fetchAllowPrivate);
  const raw = env.BGONE_FETCH_ALLOW ?? '';
  const parsed = parseFetchAllow(raw);
  if ('problem' in parsed) throw new ConfigError(`BGONE_FETCH_ALLOW must be ${FETCH_ALLOW_GRAMMAR}: ${parsed.problem} (got "${raw}")`);
  const fetchAllow = parsed.list?.entries ?? [];
  if (fetchAllowPrivate && fetchAllow.length > 0)
    throw new ConfigError(
      'BGONE_FETCH_ALLOW_PRIVATE=true opens every address, metadata ones included, so BGONE_FETCH_ALLOW would change nothing: set one of them',
    );
  return { fetchAllowPrivate, fetchAllow };
}

/** BGONE_ADDON_BUILD: auto or baseline. */
function addonBuildChoice(env: NodeJS.ProcessEnv): AddonBuild {
  const raw = env.BGONE_ADDON_BUILD ?? '';
  if (raw === '') return 'auto';
  if ((ADDON_BUILDS as readonly string[]).includes(raw)) return raw as AddonBuild;
  throw new ConfigError(`BGONE_ADDON_BUILD must be ${ADDON_BUILDS.join(' or ')} (got "${raw}")`);
}

/** BGONE_EXECUTION_PROVIDER: one provider or an ordered fall-back list (settings.ts parseExecutionProvider). */
function executionProviderChoice(env: NodeJS.ProcessEnv): ExecutionProvider {
  const raw = env.BGONE_EXECUTION_PROVIDER ?? '';
  if (raw === '') return 'cpu';
  // The library's own grammar of the value, so that the two can never disagree.
  const parsed = parseExecutionProvider(raw);
  if ('problem' in parsed) throw new ConfigError(`BGONE_EXECUTION_PROVIDER must be ${EXECUTION_PROVIDER_GRAMMAR}: ${parsed.problem} (got "${raw}")`);
  return parsed.choices.map((c) => c.text).join(',');
}

/** BGONE_TENSORRT_CACHE_DIR: a folder (made at the first TensorRT load), or off. */
function tensorrtCacheDirChoice(env: NodeJS.ProcessEnv, executionProvider: ExecutionProvider): string | undefined {
  const raw = env.BGONE_TENSORRT_CACHE_DIR || undefined;
  if (raw === undefined) return undefined;
  if (!/\btensorrt\b/.test(executionProvider))
    throw new ConfigError('BGONE_TENSORRT_CACHE_DIR applies to TensorRT only: set BGONE_EXECUTION_PROVIDER=tensorrt (or tensorrt:<device id>) with it');
  if (raw === 'off') return '';
  let isOther = false;
  try {
    isOther = !statSync(raw).isDirectory();
  } catch {}
  if (isOther) throw new ConfigError(`BGONE_TENSORRT_CACHE_DIR must be a folder (made if absent) or off (got "${raw}", which is not a folder)`);
  return raw;
}

/** BGONE_ORT_LIBRARY: an existing file (the library checks it again when configured). */
function onnxRuntimeLibrary(env: NodeJS.ProcessEnv): string | undefined {
  const raw = env.BGONE_ORT_LIBRARY || undefined;
  if (raw === undefined) return undefined;
  let isFile = false;
  try {
    isFile = statSync(raw).isFile();
  } catch {}
  if (!isFile) throw new ConfigError(`BGONE_ORT_LIBRARY must be the path of an existing file, the ONNX Runtime library (got "${raw}")`);
  return raw;
}

/** The PostgreSQL settings when BGONE_DATABASE_URL is set (or `url` is given, e.g. --database-url). */
export function loadPostgresConfig(env: NodeJS.ProcessEnv = process.env, url = env.BGONE_DATABASE_URL): PostgresConfig | undefined {
  if (url === undefined || url === '') return undefined;
  if (!/^postgres(ql)?:\/\/\S+$/.test(url)) throw new ConfigError('BGONE_DATABASE_URL must be a postgres:// or postgresql:// URL');
  const clusterSecret = env.BGONE_CLUSTER_SECRET || undefined;
  const clusterSecretPrevious = env.BGONE_CLUSTER_SECRET_PREVIOUS || undefined;
  // Never the secret itself in the message: it would reach logs.
  for (const [name, secret] of [
    ['BGONE_CLUSTER_SECRET', clusterSecret],
    ['BGONE_CLUSTER_SECRET_PREVIOUS', clusterSecretPrevious],
  ] as const)
    if (secret !== undefined && (secret.length < MIN_CLUSTER_SECRET_LENGTH || /\s/.test(secret)))
      throw new ConfigError(`${name} must be at least ${MIN_CLUSTER_SECRET_LENGTH} characters without spaces (e.g. openssl rand -hex 32)`);
  if (clusterSecretPrevious !== undefined && clusterSecret === undefined)
    throw new ConfigError('BGONE_CLUSTER_SECRET_PREVIOUS needs BGONE_CLUSTER_SECRET: it is the secret being replaced by that one');
  if (clusterSecretPrevious !== undefined && clusterSecretPrevious === clusterSecret)
    throw new ConfigError('BGONE_CLUSTER_SECRET_PREVIOUS must differ from BGONE_CLUSTER_SECRET');
  const internalUrl = baseUrl(env, 'BGONE_INTERNAL_URL', 'refused');
  if (internalUrl !== undefined && clusterSecret === undefined)
    throw new ConfigError('BGONE_INTERNAL_URL needs BGONE_CLUSTER_SECRET: peers are reached only with the cluster secret');
  return {
    url,
    poolSize: int(env, 'BGONE_DATABASE_POOL_SIZE', 10, 1, 1000),
    statementTimeoutMs: int(env, 'BGONE_DATABASE_STATEMENT_TIMEOUT_MS', 5000, 100, 600_000),
    heartbeatLapseMs: int(env, 'BGONE_NODE_HEARTBEAT_LAPSE_MS', 30_000, 1000, 3_600_000),
    keyCacheMs: int(env, 'BGONE_KEY_CACHE_MS', 1000, 0, 60_000),
    clusterSecret,
    clusterSecretPrevious,
    internalUrl,
  };
}

/** BGONE_MAX_KEYS_PER_ACCOUNT: read by the service and by the operator commands (`bgone keys create`) alike. */
export function maxKeysPerAccount(env: NodeJS.ProcessEnv = process.env): number {
  return int(env, 'BGONE_MAX_KEYS_PER_ACCOUNT', 10, 1, 1000);
}

/** The database file of the operator commands (BGONE_DB), when --db is not given. */
export function databasePath(env: NodeJS.ProcessEnv = process.env): string {
  return env.BGONE_DB || DEFAULT_DATABASE_PATH;
}
