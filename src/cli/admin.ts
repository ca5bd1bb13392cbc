/**
 * Operator commands on the store: accounts, keys, plans, credits, usage and webhook deliveries. They open the
 * same database file as the service (BGONE_DB or --db; WAL lets them run beside it).
 */
import { databasePath, loadPostgresConfig, maxKeysPerAccount } from '../config/config.js';
import { isPlanName, openStore, PLAN_NAMES, type Store } from '../store/index.js';
import { booleanFlag, type ParsedArgs, requiredFlag, stringFlag, UsageError } from './args.js';

/** --database-url or BGONE_DATABASE_URL: PostgreSQL; otherwise --db or BGONE_DB: the SQLite file. */
function open(args: ParsedArgs): Promise<Store> {
  const postgres = loadPostgresConfig(undefined, stringFlag(args, 'database-url'));
  if (postgres) {
    if (stringFlag(args, 'db') !== undefined) throw new UsageError('--db and a PostgreSQL database URL are two different stores: give one');
    return openStore({
      url: postgres.url,
      poolSize: 2,
      statementTimeoutMs: postgres.statementTimeoutMs,
      autoRecover: false,
      maxKeysPerAccount: maxKeysPerAccount(),
    });
  }
  return openStore({ path: stringFlag(args, 'db') ?? databasePath(), maxKeysPerAccount: maxKeysPerAccount() });
}

async function accountId(store: Store, ref: string): Promise<number> {
  const account = /^\d+$/.test(ref) ? await store.accounts.get(Number(ref)) : await store.accounts.getByEmail(ref);
  if (!account) throw new UsageError(`no account ${ref}`);
  return account.id;
}

function plan(value: string) {
  if (!isPlanName(value)) throw new UsageError(`--plan must be one of ${PLAN_NAMES.join(', ')}`);
  return value;
}

function print(value: unknown, args: ParsedArgs): void {
  if (booleanFlag(args, 'json')) console.log(JSON.stringify(value, null, 2));
  else if (Array.isArray(value)) console.table(value);
  else console.log(value);
}

export async function adminCommand(group: string, args: ParsedArgs): Promise<number> {
  const { action, positionals: rest } = args;
  const store = await open(args);
  try {
    switch (`${group} ${action ?? ''}`.trim()) {
      case 'accounts create': {
        const account = await store.accounts.create({ email: requiredFlag(args, 'email'), plan: plan(stringFlag(args, 'plan') ?? 'free') });
        print(account, args);
        if (!booleanFlag(args, 'no-key')) {
          const { key } = await store.keys.create(account.id);
          console.log(`API key (shown once): ${key}`);
        }
        return 0;
      }
      case 'accounts list': {
        const accounts = await store.accounts.list();
        print(
          accounts.map((a) => ({ id: a.id, email: a.email, plan: a.plan, cancelAt: a.cancelAt?.toISOString() ?? '', disabled: a.disabled })),
          args,
        );
        return 0;
      }
      case 'accounts disable':
      case 'accounts enable': {
        const id = await accountId(store, rest[0] ?? requiredFlag(args, 'account'));
        print(action === 'disable' ? await store.accounts.disable(id) : await store.accounts.enable(id), args);
        return 0;
      }
      case 'keys create': {
        const { key, info } = await store.keys.create(await accountId(store, requiredFlag(args, 'account')));
        print(info, args);
        console.log(`API key (shown once): ${key}`);
        return 0;
      }
      case 'keys list':
        print(await store.keys.list(await accountId(store, requiredFlag(args, 'account'))), args);
        return 0;
      case 'keys revoke': {
        const ref = rest[0] ?? requiredFlag(args, 'key');
        const revoked = await store.keys.revoke(/^\d+$/.test(ref) ? Number(ref) : ref);
        if (!revoked) throw new UsageError(`no key ${ref}`);
        print(revoked, args);
        return 0;
      }
      case 'plans set': {
        print(await store.accounts.setPlan(await accountId(store, requiredFlag(args, 'account')), plan(requiredFlag(args, 'plan'))), args);
        return 0;
      }
      case 'plans cancel':
      case 'plans resume': {
        const id = await accountId(store, requiredFlag(args, 'account'));
        print(action === 'cancel' ? await store.accounts.cancel(id) : await store.accounts.resume(id), args);
        return 0;
      }
      case 'credits grant': {
        const credits = Number(requiredFlag(args, 'credits'));
        if (!Number.isInteger(credits) || credits < 1) throw new UsageError('--credits must be a positive integer');
        print(await store.credits.grant(await accountId(store, requiredFlag(args, 'account')), credits), args);
        return 0;
      }
      case 'credits balance':
        print(await store.credits.balance(await accountId(store, requiredFlag(args, 'account'))), args);
        return 0;
      case 'usage': {
        const ref = stringFlag(args, 'account');
        if (ref) {
          const id = await accountId(store, ref);
          print({ balance: await store.credits.balance(id), byDay: await store.usage.byDay(id) }, args);
        } else print(await store.usage.summary(), args);
        return 0;
      }
      case 'webhooks list':
        print(
          (await store.webhooks.list(await accountId(store, requiredFlag(args, 'account')))).map((e) => ({
            id: e.id,
            url: e.url,
            description: e.description,
            createdAt: e.createdAt.toISOString(),
            disabledAt: e.disabledAt?.toISOString() ?? '',
          })),
          args,
        );
        return 0;
      case 'webhooks deliveries': {
        const ref = stringFlag(args, 'account');
        const limit = Number(stringFlag(args, 'limit') ?? 20);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError('--limit must be an integer from 1 to 1000');
        const deliveries = await store.webhooks.recentDeliveries(ref ? await accountId(store, ref) : undefined, limit);
        print(
          deliveries.map((d) => ({
            id: d.id,
            endpoint: d.endpointId,
            account: d.accountId,
            type: d.type,
            status: d.status,
            attempts: d.attempts,
            lastStatusCode: d.lastStatusCode ?? '',
            lastError: d.lastError ?? '',
            nextAttemptAt: d.nextAttemptAt?.toISOString() ?? '',
          })),
          args,
        );
        return 0;
      }
      case 'webhooks retry': {
        const id = rest[0];
        if (!id) throw new UsageError('webhooks retry needs a delivery id (msg_...)');
        if (!(await store.webhooks.retry(id))) throw new UsageError(`no delivery ${id}`);
        console.log(`delivery ${id} is due again; a running service sends it within a second`);
        return 0;
      }
      default:
        throw new UsageError(`unknown command: ${group} ${action ?? ''}`);
    }
  } finally {
    await store.close();
  }
}
