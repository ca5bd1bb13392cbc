/**
 * The command line's grammar: every command (and the action of the operator commands) with the
 * options it takes, parsed by node:util parseArgs in strict mode. An unknown option, a missing
 * value or an unexpected argument is a UsageError (exit code 2) naming the command and its options.
 */
import { parseArgs as parseArgv } from 'node:util';
import { cliFlag, optionsFor } from '../lib/option-table.js';

export class UsageError extends Error {}

interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
}
type OptionTable = Readonly<Record<string, OptionSpec>>;

interface CommandSpec {
  readonly options: OptionTable;
  /** How many arguments besides the options it takes, and what they are (for messages). */
  readonly positionals: { readonly max: number; readonly name: string };
}

const HELP_OPTIONS = { help: { type: 'boolean', short: 'h' } } as const satisfies OptionTable;

/** What every operator command takes: which database to open, and JSON output. */
const STORE_OPTIONS = { ...HELP_OPTIONS, db: { type: 'string' }, 'database-url': { type: 'string' }, json: { type: 'boolean' } } as const satisfies OptionTable;
const ACCOUNT = { account: { type: 'string' } } as const satisfies OptionTable;

const NONE = { max: 0, name: '' };

/** The library's options, as `bgone remove` takes them: the option table's CLI rows, the API's names with dashes. */
const REMOVE_OPTIONS: OptionTable = {
  ...HELP_OPTIONS,
  out: { type: 'string' },
  ...Object.fromEntries(optionsFor('cli').map((row) => [cliFlag(row), { type: 'string' } as const])),
};

/** Every command line bgone accepts, by its command words. */
export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  serve: { options: HELP_OPTIONS, positionals: NONE },
  remove: { options: REMOVE_OPTIONS, positionals: { max: Infinity, name: 'files or folders' } },
  'accounts create': { options: { ...STORE_OPTIONS, email: { type: 'string' }, plan: { type: 'string' }, 'no-key': { type: 'boolean' } }, positionals: NONE },
  'accounts list': { options: STORE_OPTIONS, positionals: NONE },
  'accounts disable': { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: { max: 1, name: 'account' } },
  'accounts enable': { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: { max: 1, name: 'account' } },
  'keys create': { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: NONE },
  'keys list': { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: NONE },
  'keys revoke': { options: { ...STORE_OPTIONS, key: { type: 'string' } }, positionals: { max: 1, name: 'key id or prefix' } },
  'plans set': { options: { ...STORE_OPTIONS, ...ACCOUNT, plan: { type: 'string' } }, positionals: NONE },
  'plans cancel': { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: NONE },
  'plans resume': { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: NONE },
  'credits grant': { options: { ...STORE_OPTIONS, ...ACCOUNT, credits: { type: 'string' } }, positionals: NONE },
  'credits balance': { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: NONE },
  usage: { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: NONE },
  'webhooks list': { options: { ...STORE_OPTIONS, ...ACCOUNT }, positionals: NONE },
  'webhooks deliveries': { options: { ...STORE_OPTIONS, ...ACCOUNT, limit: { type: 'string' } }, positionals: NONE },
  'webhooks retry': { options: STORE_OPTIONS, positionals: { max: 1, name: 'delivery id' } },
  'models list': { options: { ...HELP_OPTIONS, json: { type: 'boolean' } }, positionals: NONE },
  'models add': {
    options: {
      ...HELP_OPTIONS,
      family: { type: 'string' },
      name: { type: 'string' },
      license: { type: 'string' },
      source: { type: 'string' },
      data: { type: 'string' },
      trust: { type: 'boolean' },
    },
    positionals: { max: Infinity, name: 'model names, or an ONNX file with --family' },
  },
  'models remove': { options: HELP_OPTIONS, positionals: { max: 1, name: 'model name' } },
  'gpu install': { options: { ...HELP_OPTIONS, dir: { type: 'string' }, 'dry-run': { type: 'boolean' } }, positionals: NONE },
  'compat check': { options: { ...HELP_OPTIONS, image: { type: 'string' } }, positionals: { max: 2, name: 'URL and API key' } },
};

/** The commands that take an action word (`accounts list`), with their actions. */
const ACTIONS: ReadonlyMap<string, string[]> = (() => {
  const actions = new Map<string, string[]>();
  for (const words of Object.keys(COMMANDS)) {
    const [group, action] = words.split(' ');
    if (action) actions.set(group!, [...(actions.get(group!) ?? []), action]);
  }
  return actions;
})();

export type ParsedCommand =
  /** No command, `help`, or --help / -h anywhere: print the usage. */
  { kind: 'help'; requested: boolean } | ({ kind: 'run' } & ParsedArgs);

export interface ParsedArgs {
  /** The first command word: serve, remove, accounts, keys, plans, credits, usage. */
  readonly group: string;
  /** The second command word of the operator commands (create, list...), '' for the others. */
  readonly action: string;
  /** The arguments besides the command words and the options (files, an account, a key). */
  readonly positionals: string[];
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  readonly options: OptionTable;
}

function optionNames(options: OptionTable): string {
  return Object.keys(options)
    .filter((name) => name !== 'help')
    .map((name) => `--${name}`)
    .join(', ');
}

/**
 * Says what is wrong with argv after parseArgs refused it. parseArgs's own messages vary between
 * Node versions and do not name the command; its tokens (from a lenient pass) pinpoint the culprit.
 */
function explain(words: string, argv: string[], options: OptionTable, err: Error): string {
  const { tokens } = parseArgv({ args: argv, options, strict: false, allowPositionals: true, tokens: true });
  for (const token of tokens) {
    if (token.kind !== 'option') continue;
    const spec = Object.hasOwn(options, token.name) ? options[token.name] : undefined;
    const takes = optionNames(options);
    if (!spec) return `unknown option ${token.rawName} for "${words}"${takes ? ` (it takes ${takes})` : ' (it takes no options)'}`;
    if (spec.type === 'boolean' && token.value !== undefined) return `${token.rawName} takes no value`;
    if (spec.type === 'string' && token.value === undefined) return `${token.rawName} needs a value`;
    if (spec.type === 'string' && !token.inlineValue && token.value?.startsWith('-')) {
      return `${token.rawName} needs a value (write ${token.rawName}=${token.value} for a value starting with "-")`;
    }
  }
  return err.message;
}

/** parseArgs in strict mode; its refusals (ERR_PARSE_ARGS_*) become UsageErrors that say what is wrong. */
function parseStrictly(words: string, argv: string[], options: OptionTable): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  try {
    return parseArgv({ args: argv, options, strict: true, allowPositionals: true });
  } catch (err) {
    if (err instanceof Error && String((err as NodeJS.ErrnoException).code).startsWith('ERR_PARSE_ARGS_')) {
      throw new UsageError(explain(words, argv, options, err));
    }
    throw err;
  }
}

/** Parses `bgone`'s arguments (process.argv.slice(2)). Throws UsageError. */
export function parseCommandLine(argv: string[]): ParsedCommand {
  const [group, ...rest] = argv;
  if (group === undefined) return { kind: 'help', requested: false };
  if (group === 'help' || group === '--help' || group === '-h') return { kind: 'help', requested: true };
  let action = '';
  const actions = ACTIONS.get(group);
  if (actions) {
    action = rest[0] ?? '';
    if (action === '--help' || action === '-h') return { kind: 'help', requested: true };
    if (!actions.includes(action)) {
      throw new UsageError(action === '' || action.startsWith('-') ? `${group} needs one of: ${actions.join(', ')}` : `unknown command: ${group} ${action}`);
    }
    rest.shift();
  }
  const words = action ? `${group} ${action}` : group;
  const spec = Object.hasOwn(COMMANDS, words) ? COMMANDS[words] : undefined;
  if (!spec) throw new UsageError(`unknown command: ${group}`);
  const parsed = parseStrictly(words, rest, spec.options);
  if (parsed.values.help === true) return { kind: 'help', requested: true };
  if (parsed.positionals.length > spec.positionals.max) {
    const extra = parsed.positionals.slice(spec.positionals.max).join(' ');
    throw new UsageError(
      spec.positionals.max === 0
        ? `"${words}" takes no arguments besides its options, got: ${extra}`
        : `"${words}" takes one ${spec.positionals.name}, got also: ${extra}`,
    );
  }
  return { kind: 'run', group, action, positionals: parsed.positionals, values: parsed.values, options: spec.options };
}

/** The declared option `name`; a name the command does not declare is a bug in the command. */
function flagValue(args: ParsedArgs, name: string, type: OptionSpec['type']): string | boolean | undefined {
  if (!Object.hasOwn(args.options, name) || args.options[name]!.type !== type)
    throw new Error(`"${[args.group, args.action].filter(Boolean).join(' ')}" declares no ${type} option --${name}`);
  return args.values[name];
}

/** A string option's value, undefined when not given; an empty value is a usage error. */
export function stringFlag(args: ParsedArgs, name: string): string | undefined {
  const v = flagValue(args, name, 'string');
  if (v === '') throw new UsageError(`--${name} needs a value`);
  return v as string | undefined;
}

export function requiredFlag(args: ParsedArgs, name: string): string {
  const v = stringFlag(args, name);
  if (v === undefined) throw new UsageError(`--${name} is required`);
  return v;
}

/** Whether a boolean option (--json, --no-key) was given. */
export function booleanFlag(args: ParsedArgs, name: string): boolean {
  return flagValue(args, name, 'boolean') === true;
}
