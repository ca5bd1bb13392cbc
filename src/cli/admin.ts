/**
 * Operator commands on the SQLite store: accounts, keys, plans, credits and usage. They open the
 * same database file as the service (BGONE_DB or --db; WAL lets them run beside it).
 */
import { isPlanName, openStore, PLAN_NAMES, type Store } from '../store/index.js';
import { requiredFlag, stringFlag, UsageError, type ParsedArgs } from './args.js';

function open(args: ParsedArgs): Store {
  return openStore({ path: stringFlag(args, 'db') ?? process.env.BGONE_DB ?? 'data/bgone.db' });
}

function accountId(store: Store, ref: string): number {
  const account = /^\d+$/.test(ref) ? store.accounts.get(Number(ref)) : store.accounts.getByEmail(ref);
  if (!account) throw new UsageError(`no account ${ref}`);
  return account.id;
}

function plan(value: string) {
  if (!isPlanName(value)) throw new UsageError(`--plan must be one of ${PLAN_NAMES.join(', ')}`);
  return value;
}

function print(value: unknown, args: ParsedArgs): void {
  if (args.flags.has('json')) console.log(JSON.stringify(value, null, 2));
  else if (Array.isArray(value)) console.table(value);
  else console.log(value);
}

export function adminCommand(group: string, args: ParsedArgs): number {
  const [action, ...rest] = args.positionals;
  const store = open(args);
  try {
    switch (`${group} ${action ?? ''}`.trim()) {
      case 'accounts create': {
        const account = store.accounts.create({ email: requiredFlag(args, 'email'), plan: plan(stringFlag(args, 'plan') ?? 'free') });
        print(account, args);
        if (!args.flags.has('no-key')) {
          const { key } = store.keys.create(account.id);
          console.log(`API key (shown once): ${key}`);
        }
        return 0;
      }
      case 'accounts list':
        print(store.accounts.list().map((a) => ({ id: a.id, email: a.email, plan: a.plan, cancelAt: a.cancelAt?.toISOString() ?? '', disabled: a.disabled })), args);
        return 0;
      case 'accounts disable':
      case 'accounts enable': {
        const id = accountId(store, rest[0] ?? requiredFlag(args, 'account'));
        print(action === 'disable' ? store.accounts.disable(id) : store.accounts.enable(id), args);
        return 0;
      }
      case 'keys create': {
        const { key, info } = store.keys.create(accountId(store, requiredFlag(args, 'account')));
        print(info, args);
        console.log(`API key (shown once): ${key}`);
        return 0;
      }
      case 'keys list':
        print(store.keys.list(accountId(store, requiredFlag(args, 'account'))), args);
        return 0;
      case 'keys revoke': {
        const ref = rest[0] ?? requiredFlag(args, 'key');
        const revoked = store.keys.revoke(/^\d+$/.test(ref) ? Number(ref) : ref);
        if (!revoked) throw new UsageError(`no key ${ref}`);
        print(revoked, args);
        return 0;
      }
      case 'plans set': {
        print(store.accounts.setPlan(accountId(store, requiredFlag(args, 'account')), plan(requiredFlag(args, 'plan'))), args);
        return 0;
      }
      case 'plans cancel':
      case 'plans resume': {
        const id = accountId(store, requiredFlag(args, 'account'));
        print(action === 'cancel' ? store.accounts.cancel(id) : store.accounts.resume(id), args);
        return 0;
      }
      case 'credits grant': {
        const credits = Number(requiredFlag(args, 'credits'));
        if (!Number.isInteger(credits) || credits < 1) throw new UsageError('--credits must be a positive integer');
        print(store.credits.grant(accountId(store, requiredFlag(args, 'account')), credits), args);
        return 0;
      }
      case 'credits balance':
        print(store.credits.balance(accountId(store, requiredFlag(args, 'account'))), args);
        return 0;
      case 'usage': {
        const ref = stringFlag(args, 'account');
        if (ref) {
          const id = accountId(store, ref);
          print({ balance: store.credits.balance(id), byDay: store.usage.byDay(id) }, args);
        } else print(store.usage.summary(), args);
        return 0;
      }
      default:
        throw new UsageError(`unknown command: ${group} ${action ?? ''}`);
    }
  } finally {
    store.close();
  }
}
