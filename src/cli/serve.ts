/**
 * `bgone serve` (what `npm start` runs): the HTTP service on its embedded defaults. On an empty
 * database it creates a local Free account and prints its first API key once, so a newcomer can
 * call the API right away. SIGTERM and SIGINT drain in-flight requests, then exit.
 */
import { ConfigError, loadConfig } from '../config.js';
import { loadDashboardConfig, mountDashboard } from '../dashboard/index.js';
import { preloadModel } from '../index.js';
import { createLogger } from '../logger.js';
import { startServer } from '../server/app.js';
import { sqliteServiceStore } from '../server/service-store.js';
import { openStore } from '../store/index.js';

export const LOCAL_ACCOUNT_EMAIL = 'local@localhost';

export async function serveCommand(): Promise<number> {
  let config;
  let dashboardConfig;
  try {
    config = loadConfig();
    dashboardConfig = loadDashboardConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`bgone: invalid configuration: ${err.message}`);
      return 2;
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  const store = openStore({ path: config.databasePath, rateLimits: config.rateLimits });
  const released = store.credits.recoverAfterCrash();
  if (released > 0) logger.warn({ released }, 'released credit reservations left by a previous process');

  if (config.bootstrapAccount && store.accounts.list().length === 0) {
    const account = store.accounts.create({ email: LOCAL_ACCOUNT_EMAIL, plan: 'free' });
    const { key } = store.keys.create(account.id);
    // Printed once, to the terminal only (not through the logger): it is never shown again.
    process.stdout.write(
      `\nCreated a local Free account (${LOCAL_ACCOUNT_EMAIL}) with 100 credits per month.\n` +
        `Its API key, shown only this once:\n\n  ${key}\n\n` +
        `Try it:\n  curl -H "Authorization: Bearer ${key}" -F image_file=@photo.jpg -o cutout.png http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${config.port}/api/v1/remove\n\n`,
    );
  }

  const modelStart = performance.now();
  await preloadModel(config.model);
  logger.info({ model: config.model ?? 'default', ms: Math.round(performance.now() - modelStart) }, 'model loaded');

  const server = await startServer({
    host: config.host,
    port: config.port,
    model: config.model,
    queueLimit: config.queueLimit,
    overloadRetryAfter: config.overloadRetryAfter,
    drainTimeout: config.drainTimeout,
    store: sqliteServiceStore(store),
    logger,
    extraRoutes: (app, metrics) =>
      mountDashboard(app, { store, metrics, logger, model: config.model, trustProxy: dashboardConfig.trustProxy, overloadRetryAfter: config.overloadRetryAfter }),
  });
  logger.info({ host: config.host, port: server.port, database: config.databasePath }, `bgone listening on http://${config.host}:${server.port}`);
  logger.info(`dashboard: http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${server.port}/dashboard`);

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal, inFlight: server.inFlight() }, 'draining');
      void server.close().then(() => {
        store.close();
        logger.info('stopped');
        resolve();
      });
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}
