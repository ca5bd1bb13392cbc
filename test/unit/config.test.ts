/**
 * The one configuration (src/config/config.ts): embedded defaults, every variable read from the
 * environment given (never from import time), and a ConfigError naming the variable for a bad value.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, loadLibraryConfig, loadPostgresConfig, maxKeysPerAccount } from '../../src/config/config.js';
import { REPO_ROOT } from '../helpers/paths.js';

describe('loadConfig', () => {
  it('needs no variable: the embedded defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      databasePath: 'data/bgone.db',
      model: undefined,
      queueLimit: 16,
      overloadRetryAfter: 5,
      logLevel: 'info',
      drainTimeout: 30,
      rateLimits: { free: 10, pro: 60, ultra: 300, mega: 1000 },
      bootstrapAccount: true,
      postgres: undefined,
      http: 'auto',
      trustProxy: false,
      corsOrigins: '*',
      library: {
        modelsDir: undefined,
        inferenceThreads: 0,
        nativeConcurrency: 0,
        executionProvider: 'cpu',
        cudaMemLimitMb: 0,
        tensorrtCacheDir: undefined,
        webgpuCpuAdapter: false,
        onnxRuntimeLibrary: undefined,
        addonBuild: 'auto',
        fetchAllowPrivate: false,
        fetchAllow: [],
      },
    });
  });

  it('reads every variable it documents', () => {
    const config = loadConfig({
      BGONE_HOST: '0.0.0.0',
      BGONE_PORT: '0',
      BGONE_DB: '/tmp/x.db',
      BGONE_MODEL: 'small',
      BGONE_QUEUE_LIMIT: '4',
      BGONE_OVERLOAD_RETRY_AFTER: '9',
      BGONE_LOG_LEVEL: 'warn',
      BGONE_DRAIN_TIMEOUT: '0',
      BGONE_RATE_LIMIT_PRO: '61',
      BGONE_BOOTSTRAP_ACCOUNT: 'false',
      BGONE_HTTP: 'node',
      BGONE_TRUST_PROXY: 'yes',
      BGONE_FETCH_ALLOW_PRIVATE: 'true',
      BGONE_MODELS_DIR: '/opt/models',
      BGONE_INFERENCE_THREADS: '2',
      BGONE_NATIVE_CONCURRENCY: '1',
    });
    expect(config).toMatchObject({
      host: '0.0.0.0',
      port: 0,
      databasePath: '/tmp/x.db',
      model: 'small',
      queueLimit: 4,
      overloadRetryAfter: 9,
      logLevel: 'warn',
      drainTimeout: 0,
      bootstrapAccount: false,
      http: 'node',
      trustProxy: true,
      library: { modelsDir: '/opt/models', inferenceThreads: 2, nativeConcurrency: 1, fetchAllowPrivate: true },
    });
    expect(config.rateLimits.pro).toBe(61);
    expect(loadConfig({ PORT: '9000' }).port).toBe(9000);
  });

  it.each([
    ['BGONE_PORT', 'abc'],
    ['BGONE_PORT', '70000'],
    ['BGONE_QUEUE_LIMIT', '0'],
    ['BGONE_LOG_LEVEL', 'loud'],
    ['BGONE_HTTP', 'express'],
    ['BGONE_TRUST_PROXY', 'maybe'],
    ['BGONE_FETCH_ALLOW_PRIVATE', 'sometimes'],
    ['BGONE_BOOTSTRAP_ACCOUNT', '2'],
    ['BGONE_INFERENCE_THREADS', '-1'],
    ['BGONE_NATIVE_CONCURRENCY', '-1'],
    ['BGONE_RATE_LIMIT_FREE', '1.5'],
    ['BGONE_HOST', 'bad host!'],
    ['BGONE_BODY_TIMEOUT', '0'],
    ['BGONE_BODY_TIMEOUT', '1.5'],
    ['BGONE_ACCOUNT_IN_FLIGHT', '0'],
    ['BGONE_ACCOUNT_READ_RATE_LIMIT', '0'],
    ['BGONE_ACCOUNT_READ_RATE_LIMIT', 'often'],
    ['BGONE_MAX_KEYS_PER_ACCOUNT', '0'],
    ['BGONE_MAX_KEYS_PER_ACCOUNT', 'ten'],
    ['BGONE_UPLOAD_LIMIT', '0'],
    ['BGONE_BODY_MIN_RATE', '-1'],
    ['BGONE_BODY_MIN_RATE', '1k'],
    ['BGONE_BATCH_ACCOUNT_SHARE', '0'],
    ['BGONE_BATCH_ACCOUNT_SHARE', '101'],
    ['BGONE_PUBLIC_URL', 'ftp://h/'],
    ['BGONE_PUBLIC_URL', 'https://h/?q=1'],
  ])('refuses %s=%s with a ConfigError naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(name));
  });

  it('reads BGONE_FETCH_ALLOW in the library grammar, normalised; refuses a bad entry naming it, and the list beside BGONE_FETCH_ALLOW_PRIVATE=true', () => {
    expect(loadLibraryConfig({ BGONE_FETCH_ALLOW: 'Images.Internal, *.corp.internal , 10.1.0.0/16,fd12::/48, 169.254.169.254/32' }).fetchAllow).toEqual([
      'images.internal',
      '*.corp.internal',
      '10.1.0.0/16',
      'fd12::/48',
      '169.254.169.254',
    ]);
    expect(loadLibraryConfig({ BGONE_FETCH_ALLOW: '' }).fetchAllow).toEqual([]);
    for (const [value, why] of [
      ['10.1.0.0/8', /entry, "10\.1\.0\.0\/8", has bits set past its \/8 prefix \(its network is 10\.0\.0\.0\/8\)/],
      ['images.internal,,10.0.0.0/8', /entry 2 of 3 is empty/],
      ['images.internal:8080', /is not a host name/],
      ['https://images.internal/', /before its \/prefix/],
      ['*', /has a \* elsewhere/],
    ] as const) {
      expect(() => loadConfig({ BGONE_FETCH_ALLOW: value }), value).toThrow(ConfigError);
      expect(() => loadConfig({ BGONE_FETCH_ALLOW: value }), value).toThrow(/^BGONE_FETCH_ALLOW must be comma-separated host names/);
      expect(() => loadConfig({ BGONE_FETCH_ALLOW: value }), value).toThrow(why);
    }
    expect(() => loadConfig({ BGONE_FETCH_ALLOW: '10.0.0.0/8', BGONE_FETCH_ALLOW_PRIVATE: 'true' })).toThrow(
      /BGONE_FETCH_ALLOW_PRIVATE=true opens every address.*BGONE_FETCH_ALLOW would change nothing/,
    );
    expect(loadConfig({ BGONE_FETCH_ALLOW: '10.0.0.0/8', BGONE_FETCH_ALLOW_PRIVATE: 'false' }).library.fetchAllow).toEqual(['10.0.0.0/8']);
  });

  it('reads BGONE_CORS_ORIGINS: * (the default), off, or origins normalised as browsers send them; refuses anything else naming the entry', () => {
    expect(loadConfig({}).corsOrigins).toBe('*');
    expect(loadConfig({ BGONE_CORS_ORIGINS: '*' }).corsOrigins).toBe('*');
    expect(loadConfig({ BGONE_CORS_ORIGINS: ' off ' }).corsOrigins).toBe('off');
    expect(loadConfig({ BGONE_CORS_ORIGINS: 'OFF' }).corsOrigins).toBe('off');
    expect(
      loadConfig({ BGONE_CORS_ORIGINS: 'https://App.Example.com:443, http://localhost:3000,http://[::1]:8080, https://app.example.com' }).corsOrigins,
    ).toEqual(['https://app.example.com', 'http://localhost:3000', 'http://[::1]:8080']);
    for (const [value, why] of [
      ['https://app.example.com/', /"https:\/\/app\.example\.com\/", has a path, query or fragment/],
      ['https://app.example.com/app', /has a path/],
      ['https://app.example.com?x=1', /has a path, query or fragment/],
      ['app.example.com', /is not scheme:\/\/host\[:port\]/],
      ['ftp://files.example.com', /is not http:\/\/ or https:\/\//],
      ['https://user@app.example.com', /has credentials/],
      ['https://', /is not a valid origin/],
      ['http://[::1', /is not a valid origin/],
      ['null', /sandboxed/],
      ['https://a.example.com,*', /entry 2 of 2, "\*", stands alone/],
      ['https://a.example.com,off', /stands alone/],
      ['https://a.example.com,,https://b.example.com', /entry 2 of 3 is empty/],
    ] as const) {
      expect(() => loadConfig({ BGONE_CORS_ORIGINS: value }), value).toThrow(ConfigError);
      expect(() => loadConfig({ BGONE_CORS_ORIGINS: value }), value).toThrow(/^BGONE_CORS_ORIGINS must be \*, off, or comma-separated origins/);
      expect(() => loadConfig({ BGONE_CORS_ORIGINS: value }), value).toThrow(why);
    }
  });

  it('reads the abuse limits: body deadline, per-account in-flight cap, keys per account, account reads (bad values: the refusals above)', () => {
    expect(loadConfig({})).toMatchObject({ bodyTimeout: 60, accountInFlight: 4, maxKeysPerAccount: 10, accountReadsPerMinute: 120 });
    expect(
      loadConfig({ BGONE_BODY_TIMEOUT: '5', BGONE_ACCOUNT_IN_FLIGHT: '2', BGONE_MAX_KEYS_PER_ACCOUNT: '3', BGONE_ACCOUNT_READ_RATE_LIMIT: '30' }),
    ).toMatchObject({
      bodyTimeout: 5,
      accountInFlight: 2,
      maxKeysPerAccount: 3,
      accountReadsPerMinute: 30,
    });
    expect(maxKeysPerAccount({ BGONE_MAX_KEYS_PER_ACCOUNT: '25' })).toBe(25);
  });

  it('reads the upload limits and the batch memory share: defaults and set values (bad values: the refusals above)', () => {
    expect(loadConfig({})).toMatchObject({ uploadLimit: 64, bodyMinRate: 16384, batches: { accountSharePercent: 25 } });
    expect(loadConfig({ BGONE_UPLOAD_LIMIT: '8', BGONE_BODY_MIN_RATE: '0', BGONE_BATCH_ACCOUNT_SHARE: '100' })).toMatchObject({
      uploadLimit: 8,
      bodyMinRate: 0,
      batches: { accountSharePercent: 100 },
    });
  });

  it('reads the public URL of result links (BGONE_PUBLIC_URL) without its trailing slashes; none by default', () => {
    expect(loadConfig({}).batches.publicUrl).toBeUndefined();
    expect(loadConfig({ BGONE_PUBLIC_URL: 'https://images.example.com/bgone//' }).batches.publicUrl).toBe('https://images.example.com/bgone');
  });

  it('reads the webhook outbox retention (BGONE_WEBHOOK_RETENTION, seconds; default 7 days); refuses bad values', () => {
    expect(loadConfig({}).batches.webhookRetentionSeconds).toBe(7 * 24 * 3600);
    expect(loadConfig({ BGONE_WEBHOOK_RETENTION: '86400' }).batches.webhookRetentionSeconds).toBe(86_400);
    for (const value of ['0', '59', 'a week', '-1', '31536001'])
      expect(() => loadConfig({ BGONE_WEBHOOK_RETENTION: value }), value).toThrow(/BGONE_WEBHOOK_RETENTION/);
  });

  it('serves /metrics on loopback by default (BGONE_METRICS_LISTEN), on the public port only with BGONE_METRICS_TOKEN', () => {
    expect(loadConfig({}).metrics).toEqual({ listen: { host: '127.0.0.1', port: 9464 }, token: undefined });
    expect(loadConfig({ BGONE_METRICS_LISTEN: '[::1]:9100', BGONE_METRICS_TOKEN: 'scrape-token-0123456789' }).metrics).toEqual({
      listen: { host: '::1', port: 9100 },
      token: 'scrape-token-0123456789',
    });
    expect(loadConfig({ BGONE_METRICS_LISTEN: 'off' }).metrics.listen).toBeUndefined();
    for (const value of ['9464', 'localhost', 'host:99999', 'a b:1', '::1:9100'])
      expect(() => loadConfig({ BGONE_METRICS_LISTEN: value }), value).toThrow(/BGONE_METRICS_LISTEN/);
    for (const value of ['short', 'sixteen chars ok']) expect(() => loadConfig({ BGONE_METRICS_TOKEN: value }), value).toThrow(/BGONE_METRICS_TOKEN/);
  });

  it('has a library-only part for commands that run no service', () => {
    expect(loadLibraryConfig({ BGONE_NATIVE_CONCURRENCY: '3' })).toEqual({
      modelsDir: undefined,
      inferenceThreads: 0,
      nativeConcurrency: 3,
      executionProvider: 'cpu',
      cudaMemLimitMb: 0,
      tensorrtCacheDir: undefined,
      webgpuCpuAdapter: false,
      onnxRuntimeLibrary: undefined,
      addonBuild: 'auto',
      fetchAllowPrivate: false,
      fetchAllow: [],
      modelIdleSeconds: 600,
      modelsMemoryMb: 0,
      inferenceTimeout: 60,
    });
  });

  it('reads the models a request may choose: BGONE_MODELS_ALLOWED names, or all; the default model only without it', () => {
    expect(loadConfig({}).modelsAllowed).toEqual([]);
    expect(loadConfig({ BGONE_MODELS_ALLOWED: 'medium-fp32, my-isnet' }).modelsAllowed).toEqual(['medium-fp32', 'my-isnet']);
    expect(loadConfig({ BGONE_MODELS_ALLOWED: 'all' }).modelsAllowed).toBe('all');
    expect(() => loadConfig({ BGONE_MODELS_ALLOWED: 'medium,Bad Name' })).toThrow(/BGONE_MODELS_ALLOWED/);
    expect(loadLibraryConfig({ BGONE_MODEL_IDLE_SECONDS: '0', BGONE_MODELS_MEMORY_MB: '2048' })).toMatchObject({ modelIdleSeconds: 0, modelsMemoryMb: 2048 });
    expect(() => loadLibraryConfig({ BGONE_MODELS_MEMORY_MB: '-1' })).toThrow(/BGONE_MODELS_MEMORY_MB/);
  });

  it('selects PostgreSQL with BGONE_DATABASE_URL, with its pool, statement timeout, heartbeat lapse and key cache', () => {
    expect(loadConfig({ BGONE_DATABASE_URL: 'postgres://bgone:secret@db.internal:5432/bgone' }).postgres).toEqual({
      url: 'postgres://bgone:secret@db.internal:5432/bgone',
      poolSize: 10,
      statementTimeoutMs: 5000,
      heartbeatLapseMs: 30_000,
      keyCacheMs: 1000,
    });
    expect(
      loadPostgresConfig(
        { BGONE_DATABASE_POOL_SIZE: '3', BGONE_DATABASE_STATEMENT_TIMEOUT_MS: '2000', BGONE_NODE_HEARTBEAT_LAPSE_MS: '5000', BGONE_KEY_CACHE_MS: '0' },
        'postgresql://x/y',
      ),
    ).toEqual({ url: 'postgresql://x/y', poolSize: 3, statementTimeoutMs: 2000, heartbeatLapseMs: 5000, keyCacheMs: 0 });
    expect(() => loadPostgresConfig({ BGONE_KEY_CACHE_MS: '60001' }, 'postgresql://x/y')).toThrow(/BGONE_KEY_CACHE_MS/);
  });

  it('refuses a database URL that is not postgres://, without echoing it (it may hold a password)', () => {
    expect(() => loadConfig({ BGONE_DATABASE_URL: 'mysql://u:hunter2@h/db' })).toThrow(/BGONE_DATABASE_URL/);
    expect(() => loadConfig({ BGONE_DATABASE_URL: 'mysql://u:hunter2@h/db' })).not.toThrow(/hunter2/);
    expect(() => loadConfig({ BGONE_DATABASE_URL: 'postgres://h/db', BGONE_DATABASE_POOL_SIZE: '0' })).toThrow(/BGONE_DATABASE_POOL_SIZE/);
  });

  it('takes the cluster secret and the internal address of several nodes, and refuses weak or malformed ones without echoing the secret', () => {
    const secret = `${'a'.repeat(31)}b`;
    const url = 'postgres://h/db';
    expect(loadConfig({ BGONE_DATABASE_URL: url }).postgres).toMatchObject({ clusterSecret: undefined, internalUrl: undefined });
    expect(loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: secret, BGONE_INTERNAL_URL: 'http://10.0.0.2:8080/' }).postgres).toMatchObject({
      clusterSecret: secret,
      internalUrl: 'http://10.0.0.2:8080',
    });
    const short = 'x'.repeat(31);
    expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: short })).toThrow(/BGONE_CLUSTER_SECRET must be at least 32/);
    expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: short })).not.toThrow(new RegExp(short));
    expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: `${secret} x` })).toThrow(/BGONE_CLUSTER_SECRET/);
    for (const bad of ['10.0.0.2:8080', 'ftp://h/', 'http://h/?q=1', 'http://u:p@h/'])
      expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: secret, BGONE_INTERNAL_URL: bad })).toThrow(/BGONE_INTERNAL_URL must be/);
    // An address others would call without the secret the routes require: refused.
    expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_INTERNAL_URL: 'http://h:1' })).toThrow(/BGONE_INTERNAL_URL needs BGONE_CLUSTER_SECRET/);
    // On SQLite (one node) neither means anything.
    expect(() => loadConfig({ BGONE_CLUSTER_SECRET: secret })).toThrow(/set BGONE_DATABASE_URL/);
    expect(() => loadConfig({ BGONE_INTERNAL_URL: 'http://h:1' })).toThrow(/set BGONE_DATABASE_URL/);
  });

  it('takes the previous cluster secret of a rotation beside the current one only, as strong, and different', () => {
    const secret = `${'a'.repeat(31)}b`;
    const previous = `${'c'.repeat(31)}d`;
    const url = 'postgres://h/db';
    expect(loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: secret }).postgres).toMatchObject({ clusterSecretPrevious: undefined });
    expect(loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: secret, BGONE_CLUSTER_SECRET_PREVIOUS: previous }).postgres).toMatchObject({
      clusterSecret: secret,
      clusterSecretPrevious: previous,
    });
    const short = 'x'.repeat(31);
    expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: secret, BGONE_CLUSTER_SECRET_PREVIOUS: short })).toThrow(
      /BGONE_CLUSTER_SECRET_PREVIOUS must be at least 32/,
    );
    expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: secret, BGONE_CLUSTER_SECRET_PREVIOUS: short })).not.toThrow(new RegExp(short));
    expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET_PREVIOUS: previous })).toThrow(/needs BGONE_CLUSTER_SECRET/);
    expect(() => loadConfig({ BGONE_DATABASE_URL: url, BGONE_CLUSTER_SECRET: secret, BGONE_CLUSTER_SECRET_PREVIOUS: secret })).toThrow(/must differ/);
    expect(() => loadConfig({ BGONE_CLUSTER_SECRET_PREVIOUS: previous })).toThrow(/set BGONE_DATABASE_URL/);
  });
});

describe('the execution provider (BGONE_EXECUTION_PROVIDER, BGONE_CUDA_MEM_LIMIT_MB, BGONE_ORT_LIBRARY)', () => {
  const library = join(REPO_ROOT, 'package.json'); // any existing file: the check is that it exists

  it.each([
    [{}, { executionProvider: 'cpu', cudaMemLimitMb: 0, onnxRuntimeLibrary: undefined }],
    [{ BGONE_EXECUTION_PROVIDER: '' }, { executionProvider: 'cpu' }],
    [{ BGONE_EXECUTION_PROVIDER: 'cpu' }, { executionProvider: 'cpu' }],
    [{ BGONE_EXECUTION_PROVIDER: 'cuda' }, { executionProvider: 'cuda', cudaMemLimitMb: 0 }],
    [{ BGONE_EXECUTION_PROVIDER: 'cuda:0' }, { executionProvider: 'cuda:0' }],
    [
      { BGONE_EXECUTION_PROVIDER: 'cuda:255', BGONE_CUDA_MEM_LIMIT_MB: '6144' },
      { executionProvider: 'cuda:255', cudaMemLimitMb: 6144 },
    ],
    [
      { BGONE_EXECUTION_PROVIDER: 'cuda:1', BGONE_ORT_LIBRARY: library },
      { executionProvider: 'cuda:1', onnxRuntimeLibrary: library },
    ],
    [{ BGONE_EXECUTION_PROVIDER: 'webgpu' }, { executionProvider: 'webgpu' }],
    [
      { BGONE_EXECUTION_PROVIDER: 'tensorrt:2', BGONE_CUDA_MEM_LIMIT_MB: '1024' },
      { executionProvider: 'tensorrt:2', cudaMemLimitMb: 1024 },
    ],
    [{ BGONE_EXECUTION_PROVIDER: 'webgpu,cpu' }, { executionProvider: 'webgpu,cpu' }],
    [{ BGONE_EXECUTION_PROVIDER: ' tensorrt , cuda:1 ,webgpu, cpu' }, { executionProvider: 'tensorrt,cuda:1,webgpu,cpu' }],
    [
      { BGONE_EXECUTION_PROVIDER: 'webgpu,cuda', BGONE_CUDA_MEM_LIMIT_MB: '2048' },
      { executionProvider: 'webgpu,cuda', cudaMemLimitMb: 2048 },
    ],
  ])('%j gives %j', (env, expected) => {
    expect(loadLibraryConfig(env)).toMatchObject(expected);
    expect(loadConfig(env).library).toMatchObject(expected);
  });

  it.each([
    ['BGONE_EXECUTION_PROVIDER', 'gpu'],
    ['BGONE_EXECUTION_PROVIDER', 'CUDA'],
    ['BGONE_EXECUTION_PROVIDER', 'cuda:'],
    ['BGONE_EXECUTION_PROVIDER', 'cuda:-1'],
    ['BGONE_EXECUTION_PROVIDER', 'cuda:1.5'],
    ['BGONE_EXECUTION_PROVIDER', 'cuda:01'],
    ['BGONE_EXECUTION_PROVIDER', 'cuda:256'],
    ['BGONE_EXECUTION_PROVIDER', 'cpu:0'],
    ['BGONE_EXECUTION_PROVIDER', 'cuda 0'],
    ['BGONE_EXECUTION_PROVIDER', 'webgpu:0'],
    ['BGONE_EXECUTION_PROVIDER', 'tensorrt:256'],
    ['BGONE_EXECUTION_PROVIDER', 'webgpu,,cpu'],
    ['BGONE_EXECUTION_PROVIDER', 'webgpu,'],
    ['BGONE_EXECUTION_PROVIDER', 'cpu,webgpu'],
    ['BGONE_EXECUTION_PROVIDER', 'cuda,cuda:1'],
    ['BGONE_EXECUTION_PROVIDER', 'webgpu;cpu'],
    ['BGONE_CUDA_MEM_LIMIT_MB', '0'],
    ['BGONE_CUDA_MEM_LIMIT_MB', '-5'],
    ['BGONE_CUDA_MEM_LIMIT_MB', '1.5'],
    ['BGONE_CUDA_MEM_LIMIT_MB', 'lots'],
    ['BGONE_ORT_LIBRARY', '/no/such/libonnxruntime.so.1'],
    ['BGONE_ORT_LIBRARY', REPO_ROOT],
  ])('refuses %s=%s with a ConfigError naming it and the value', (name, value) => {
    const env = { BGONE_EXECUTION_PROVIDER: 'cuda', [name]: value };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(`${name} must `);
    expect(() => loadConfig(env)).toThrow(`(got "${value}")`);
    expect(() => loadLibraryConfig(env)).toThrow(ConfigError);
  });

  it('BGONE_TENSORRT_CACHE_DIR: a folder, made at the first TensorRT load, or off; only with tensorrt in the list', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'bgone-config-')), 'trt');
    expect(loadLibraryConfig({ BGONE_EXECUTION_PROVIDER: 'tensorrt' }).tensorrtCacheDir).toBeUndefined();
    expect(loadLibraryConfig({ BGONE_EXECUTION_PROVIDER: 'tensorrt,cuda', BGONE_TENSORRT_CACHE_DIR: dir }).tensorrtCacheDir).toBe(dir);
    expect(loadConfig({ BGONE_EXECUTION_PROVIDER: 'tensorrt:1', BGONE_TENSORRT_CACHE_DIR: 'off' }).library.tensorrtCacheDir).toBe('');
    expect(() => loadConfig({ BGONE_EXECUTION_PROVIDER: 'cuda', BGONE_TENSORRT_CACHE_DIR: dir })).toThrow(
      'BGONE_TENSORRT_CACHE_DIR applies to TensorRT only: set BGONE_EXECUTION_PROVIDER=tensorrt',
    );
    const file = join(REPO_ROOT, 'package.json');
    expect(() => loadLibraryConfig({ BGONE_EXECUTION_PROVIDER: 'tensorrt', BGONE_TENSORRT_CACHE_DIR: file })).toThrow(
      `BGONE_TENSORRT_CACHE_DIR must be a folder (made if absent) or off (got "${file}", which is not a folder)`,
    );
  });

  it('BGONE_WEBGPU_CPU_ADAPTER: true or false, false unless set; only with webgpu in the list', () => {
    expect(loadLibraryConfig({ BGONE_EXECUTION_PROVIDER: 'webgpu' }).webgpuCpuAdapter).toBe(false);
    expect(loadLibraryConfig({ BGONE_EXECUTION_PROVIDER: 'webgpu,cpu', BGONE_WEBGPU_CPU_ADAPTER: 'true' }).webgpuCpuAdapter).toBe(true);
    expect(loadConfig({ BGONE_EXECUTION_PROVIDER: 'webgpu', BGONE_WEBGPU_CPU_ADAPTER: '0' }).library.webgpuCpuAdapter).toBe(false);
    // Off is off with any provider.
    expect(loadLibraryConfig({ BGONE_WEBGPU_CPU_ADAPTER: 'false' }).webgpuCpuAdapter).toBe(false);
    expect(() => loadConfig({ BGONE_EXECUTION_PROVIDER: 'cuda,cpu', BGONE_WEBGPU_CPU_ADAPTER: 'true' })).toThrow(
      'BGONE_WEBGPU_CPU_ADAPTER applies to WebGPU only: set BGONE_EXECUTION_PROVIDER=webgpu with it',
    );
    expect(() => loadLibraryConfig({ BGONE_EXECUTION_PROVIDER: 'webgpu', BGONE_WEBGPU_CPU_ADAPTER: 'cpu' })).toThrow(
      'BGONE_WEBGPU_CPU_ADAPTER must be true or false (got "cpu")',
    );
  });

  it.each([
    ['gpu', '"gpu" is not a provider'],
    ['cuda:256', '"cuda:256": the device id must be a GPU index from 0 to 255'],
    ['webgpu:1', '"webgpu:1": webgpu takes no device id (it uses the first GPU adapter)'],
    ['webgpu,,cpu', 'entry 2 of 3 is empty'],
    ['cpu,webgpu', '"webgpu" follows cpu, which always starts, so it would never be tried'],
    ['cuda:0,webgpu,cuda:1', 'cuda is listed twice'],
  ])('the provider message for %s lists what is allowed and says what is wrong', (value, problem) => {
    expect(() => loadConfig({ BGONE_EXECUTION_PROVIDER: value })).toThrow(
      'BGONE_EXECUTION_PROVIDER must be one provider or an ordered fall-back list (e.g. webgpu,cpu) of cpu, cuda[:<device id>], ' +
        `tensorrt[:<device id>] and webgpu: ${problem} (got "${value}")`,
    );
  });

  it.each([
    [{}, 'auto'],
    [{ BGONE_ADDON_BUILD: '' }, 'auto'],
    [{ BGONE_ADDON_BUILD: 'auto' }, 'auto'],
    [{ BGONE_ADDON_BUILD: 'baseline' }, 'baseline'],
  ])('BGONE_ADDON_BUILD: %j gives %s', (env, addonBuild) => {
    expect(loadLibraryConfig(env).addonBuild).toBe(addonBuild);
    expect(loadConfig(env).library.addonBuild).toBe(addonBuild);
  });

  it.each(['avx2', 'Baseline', 'none'])('refuses BGONE_ADDON_BUILD=%s, naming what is allowed', (value) => {
    expect(() => loadLibraryConfig({ BGONE_ADDON_BUILD: value })).toThrow(ConfigError);
    expect(() => loadConfig({ BGONE_ADDON_BUILD: value })).toThrow(`BGONE_ADDON_BUILD must be auto or baseline (got "${value}")`);
  });

  it('a GPU memory limit without CUDA or TensorRT is refused rather than ignored', () => {
    expect(() => loadConfig({ BGONE_CUDA_MEM_LIMIT_MB: '4096' })).toThrow(ConfigError);
    for (const provider of ['cpu', 'webgpu', 'webgpu,cpu']) {
      expect(() => loadConfig({ BGONE_CUDA_MEM_LIMIT_MB: '4096', BGONE_EXECUTION_PROVIDER: provider })).toThrow(
        /BGONE_CUDA_MEM_LIMIT_MB applies to CUDA and TensorRT only: .*BGONE_EXECUTION_PROVIDER=cuda/,
      );
    }
  });
});
