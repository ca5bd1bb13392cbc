/**
 * `bgone serve` (what `npm start` runs): the HTTP service on its embedded defaults. On an empty
 * database it creates a local Free account and prints its first API key once, with a curl line, as
 * soon as the server listens, so a newcomer can call the API right away. SIGTERM and SIGINT drain
 * in-flight requests, then exit.
 */
import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { publishedDigests } from '../cluster/secret.js';
import { type Config, ConfigError, loadConfig, serviceLimits } from '../config/config.js';
import { createLogger } from '../config/logger.js';
import { mountDashboard } from '../dashboard/index.js';
import { loadBackend } from '../http/backend-select.js';
import { addonFileInUse, BgoneError, concurrencyInUse, configure, inferenceProviders, librarySettings, preloadModel, readManifest } from '../lib/index.js';
import { stopRuns } from '../lib/native.js';
import { type RunningServer, startServer } from '../server.js';
import { type Account, ClusterSecretMismatch, ORPHAN_ERROR, openStore, type Store, StoreError } from '../store/index.js';

export const LOCAL_ACCOUNT_EMAIL = 'local@localhost';

/**
 * Creates the local account on an empty database and prints its key, once, to the terminal only.
 * Called once the server listens on `port`, so that the curl line printed works when pasted at once
 * (and a start that fails before listening leaves no account whose key nobody saw).
 */
async function bootstrapLocalAccount(store: Store, config: Config, port: number): Promise<void> {
  if ((await store.accounts.list()).length > 0) return;
  let account: Account;
  try {
    account = await store.accounts.create({ email: LOCAL_ACCOUNT_EMAIL, plan: 'free' });
  } catch (err) {
    // Several nodes started at once on an empty PostgreSQL database: another one made it first.
    if (err instanceof StoreError && err.code === 'email_taken') return;
    throw err;
  }
  const { key } = await store.keys.create(account.id);
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
  // Not through the logger: the key is never shown again and must not reach log files.
  process.stdout.write(
    `\nCreated a local Free account (${LOCAL_ACCOUNT_EMAIL}) with 100 credits per month.\n` +
      `Its API key, shown only this once:\n\n  ${key}\n\n` +
      `Try it:\n  curl -H "Authorization: Bearer ${key}" -F image_file=@photo.jpg -o cutout.png http://${host}:${port}/api/v1/remove\n\n`,
  );
}

export async function serveCommand(): Promise<number> {
  let config: Config;
  try {
    config = loadConfig();
    configure(config.library);
  } catch (err) {
    if (err instanceof ConfigError || err instanceof BgoneError) {
      console.error(`bgone: invalid configuration: ${err.message}`);
      return 2;
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  let store: Store;
  try {
    store = await openStore(
      config.postgres
        ? {
            url: config.postgres.url,
            rateLimits: config.rateLimits,
            poolSize: config.postgres.poolSize,
            statementTimeoutMs: config.postgres.statementTimeoutMs,
            heartbeatLapseMs: config.postgres.heartbeatLapseMs,
            keyCacheMs: config.postgres.keyCacheMs,
            maxKeysPerAccount: config.maxKeysPerAccount,
          }
        : { path: config.databasePath, rateLimits: config.rateLimits, maxKeysPerAccount: config.maxKeysPerAccount, serviceOwner: true },
    );
  } catch (err) {
    if (err instanceof StoreError && err.code === 'locked') {
      console.error(`bgone: ${err.message}`);
      return 1;
    }
    if (config.postgres) {
      // Never the URL itself: it may hold a password.
      console.error(`bgone: cannot open the PostgreSQL database of BGONE_DATABASE_URL: ${(err as Error).message}`);
      return 1;
    }
    throw err;
  }
  try {
    // Batch images a previous process left unended are failed first (their events written, their
    // credits released); then any other reservation it left.
    const failed = await store.batches.failOrphans(ORPHAN_ERROR);
    if (failed > 0) logger.warn({ failed }, 'failed the batch images a previous process left unfinished');
    const released = await store.credits.recoverAfterCrash();
    if (released > 0) logger.warn({ released }, 'released credit reservations left by a previous process');
    // Several nodes share batch work only with the secret: a node without it would keep its
    // batches to itself, and a balancer sending a batch's requests elsewhere would get 410s.
    if (config.postgres && !config.postgres.clusterSecret && store.cluster && (await store.cluster.peers()).length > 0)
      throw new Error('other nodes on this database share batch work with BGONE_CLUSTER_SECRET: set the same secret on this node');
    // With another secret, its claims of their images and theirs of its images would be refused:
    // checked before the model loads, and again, under a lock, when the node announces itself.
    if (config.postgres?.clusterSecret && store.cluster) {
      const digests = publishedDigests({ current: config.postgres.clusterSecret, previous: config.postgres.clusterSecretPrevious });
      const refused = await store.cluster.secretMismatches(digests);
      if (refused.length > 0) throw new ClusterSecretMismatch(refused);
    }
    const modelStart = performance.now();
    const model = await preloadModel(config.model);
    // Which addon build runs (the AVX2 one where the CPU has it): what an operator comparing nodes needs.
    const addon = basename(addonFileInUse() ?? '');
    logger.info({ model, ms: Math.round(performance.now() - modelStart), addon }, 'model loaded');
    logInferenceProvider(logger, config.model, model);
    warnModelsAllowed(logger, config.modelsAllowed);
  } catch (err) {
    // Closed, so that its connections do not keep a process that cannot serve alive.
    console.error(`bgone: cannot start: ${(err as Error).message}`);
    await store.close();
    return 1;
  }

  let server: RunningServer;
  try {
    // The backend is chosen here, where the server starts: node:http unless BGONE_HTTP=uws, which
    // fails the start when uWebSockets.js cannot load.
    const chosen = loadBackend(config.http);
    logger.info({ http: chosen.backend.name, reason: chosen.reason }, `HTTP backend: ${chosen.backend.name}`);
    server = await startServer({
      host: config.host,
      port: config.port,
      http: chosen.backend,
      model: config.model,
      modelsAllowed: config.modelsAllowed,
      ...serviceLimits(config),
      drainTimeout: config.drainTimeout,
      store,
      logger,
      batches: config.batches,
      cors: config.corsOrigins,
      cluster: config.postgres?.clusterSecret
        ? { secret: config.postgres.clusterSecret, previousSecret: config.postgres.clusterSecretPrevious, internalUrl: config.postgres.internalUrl }
        : undefined,
      // node:http refuses a port another node holds; uWS would share it (SO_REUSEPORT) and a
      // scrape would reach either node.
      metrics: { ...config.metrics, http: loadBackend('node').backend },
      mount: (context) =>
        mountDashboard(context, {
          store,
          logger,
          model: config.model,
          trustProxy: config.trustProxy,
          signup: config.signup.enabled,
          signupsPerIpPerHour: config.signup.perIpPerHour,
          webhookAllowPrivate: config.batches.webhookAllowPrivate,
          onWebhookTest: context.webhookEventWritten,
        }),
    });
  } catch (err) {
    // e.g. BGONE_HTTP=uws where no uWebSockets.js binary loads, or the port is taken.
    console.error(`bgone: cannot start${err instanceof ClusterSecretMismatch ? '' : ' the HTTP server'}: ${(err as Error).message}`);
    await store.close();
    return 1;
  }
  // The server listens from here, so the first key's curl line works when pasted at once. It is
  // printed before the listening line, so whoever waits for that line (a script, the tests) has it.
  if (config.bootstrapAccount) {
    try {
      await bootstrapLocalAccount(store, config, server.port);
    } catch (err) {
      console.error(`bgone: cannot create the local account: ${(err as Error).message}`);
      await server.close();
      await store.close();
      return 1;
    }
  }
  const shownHost = config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
  logger.info(
    { host: config.host, port: server.port, http: server.backend, database: config.postgres ? 'postgres' : config.databasePath },
    `bgone listening on http://${config.host}:${server.port}`,
  );
  logger.info(`dashboard: http://${shownHost}:${server.port}/dashboard`);
  if (server.metricsPort !== undefined) logger.info(`metrics: http://${config.metrics.listen!.host}:${server.metricsPort}/metrics`);

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal, inFlight: server.inFlight() }, 'draining');
      // Whatever a run does (a model that loops), the process ends within the drain time: then every
      // run is told to stop, and the process exits without waiting for the native core's threads.
      const deadline = setTimeout(
        () => {
          logger.error({ runs: stopRuns() }, 'the drain time passed with work still running: exiting');
          process.exit(1); // does not wait for the native core's threads
        },
        config.drainTimeout * 1000 + EXIT_GRACE_MS,
      );
      deadline.unref();
      void server
        .close()
        .then(() => store.close())
        .then(() => {
          // Runs still going after the drain answer nobody: stopped, so that their jobs end.
          const runs = stopRuns();
          logger.info(runs > 0 ? { runs } : {}, 'stopped');
          resolve();
          if (runs > 0) setTimeout(() => process.exit(0), EXIT_GRACE_MS).unref();
        });
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}

/**
 * BGONE_MODELS_ALLOWED naming a model the manifests do not list (a typo, a model not added yet), or
 * one whose file is not installed: a warning at start naming each, since a request naming it would
 * get 400 model_unavailable. The start goes on: the other names serve.
 */
function warnModelsAllowed(logger: ReturnType<typeof createLogger>, allowed: readonly string[] | 'all'): void {
  if (allowed === 'all') return;
  const models = readManifest().models;
  const unknown = allowed.filter((name) => !Object.hasOwn(models, name));
  if (unknown.length > 0) {
    logger.warn(
      { unknown, listed: Object.keys(models) },
      `BGONE_MODELS_ALLOWED names models that no manifest lists: ${unknown.join(', ')} (see "bgone models list"); requests naming them get 400 model_unavailable`,
    );
  }
  const dir = librarySettings().modelsDir;
  const missing = allowed.filter((name) => Object.hasOwn(models, name) && !existsSync(join(dir, models[name]!.file)));
  if (missing.length > 0) {
    logger.warn({ missing }, `BGONE_MODELS_ALLOWED names models that are not installed: ${missing.join(', ')} (install them with "npx bgone models add")`);
  }
}

/** What the drain gets past its own time for the connections' close and the store's, before the exit is forced. */
const EXIT_GRACE_MS = 2000;

/**
 * The startup log of where inference runs: each provider of a fall-back list that could not start
 * (a warning, with ONNX Runtime's reason), then the provider in use and the model it runs; on a GPU
 * provider, the default model's float variant is said to be one.
 */
function logInferenceProvider(logger: ReturnType<typeof createLogger>, asked: string | undefined, model: string): void {
  const { provider, deviceId, device, configured, skipped } = inferenceProviders();
  for (const { provider: entry, reason } of skipped) {
    logger.warn({ provider: entry, configured, reason }, `execution provider ${entry} cannot start, falling back to the next of ${configured}`);
  }
  const defaultModel = readManifest().default;
  const variant = asked === undefined && model !== defaultModel ? ` (the float variant of ${defaultModel}: its int8 graph is for the CPU)` : '';
  const where = `${provider}${deviceId === null ? '' : `:${deviceId}`}${device === null ? '' : ` (${device})`}`;
  const jobs = concurrencyInUse();
  logger.info(
    { provider, device_id: deviceId, ...(device === null ? {} : { device }), configured, model, native_concurrency: jobs },
    `inference on ${where}, model ${model}${variant}, ${jobs} jobs at once`,
  );
}
