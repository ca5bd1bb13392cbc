/**
 * The command line's grammar (src/cli/args.ts, on node:util parseArgs): which words and options
 * each command takes, the help forms, and the exact usage error (exit code 2) for each mistake.
 */
import { describe, expect, it } from 'vitest';
import { booleanFlag, COMMANDS, type ParsedArgs, parseCommandLine, requiredFlag, stringFlag, UsageError } from '../../src/cli/args.js';

/** Parses a command line that must run (not help). */
function run(line: string[]): ParsedArgs {
  const parsed = parseCommandLine(line);
  if (parsed.kind !== 'run') throw new Error(`expected a command, got ${JSON.stringify(parsed)}`);
  return parsed;
}

/** The UsageError message for a command line. */
function usageError(line: string[]): string {
  try {
    parseCommandLine(line);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error(`${line.join(' ')} was accepted`);
}

describe('help', () => {
  it('is shown as a usage mistake for a bare `bgone`', () => {
    expect(parseCommandLine([])).toEqual({ kind: 'help', requested: false });
  });

  it.each([
    ['help'],
    ['--help'],
    ['-h'],
    ['accounts', '--help'],
    ['keys', '-h'],
    ['accounts', 'list', '--help'],
    ['remove', 'a.jpg', '-h'],
    ['serve', '--help'],
  ])('is requested by %j', (...line) => {
    expect(parseCommandLine(line)).toEqual({ kind: 'help', requested: true });
  });
});

describe('commands', () => {
  it('knows serve, remove, the operator commands with their actions and models', () => {
    expect(Object.keys(COMMANDS)).toEqual([
      'serve',
      'remove',
      'accounts create',
      'accounts list',
      'accounts disable',
      'accounts enable',
      'keys create',
      'keys list',
      'keys revoke',
      'plans set',
      'plans cancel',
      'plans resume',
      'credits grant',
      'credits balance',
      'usage',
      'webhooks list',
      'webhooks deliveries',
      'webhooks retry',
      'models list',
      'models add',
      'models remove',
      'gpu install',
      'compat check',
    ]);
  });

  it('parses `gpu install` with --dir and --dry-run, and nothing else', () => {
    expect(run(['gpu', 'install', '--dir', '/opt/bgone-gpu', '--dry-run'])).toMatchObject({
      group: 'gpu',
      action: 'install',
      positionals: [],
      values: { dir: '/opt/bgone-gpu', 'dry-run': true },
    });
    expect(usageError(['gpu'])).toBe('gpu needs one of: install');
    expect(usageError(['gpu', 'install', 'cuda'])).toMatch(/"gpu install" takes no arguments besides its options, got: cuda/);
  });

  it('parses `models add` with model names and `models list --json`', () => {
    expect(run(['models', 'add', 'small', 'medium-fp32'])).toMatchObject({ group: 'models', action: 'add', positionals: ['small', 'medium-fp32'] });
    expect(run(['models', 'list', '--json'])).toMatchObject({ group: 'models', action: 'list', values: { json: true } });
    expect(run(['models', 'add', 'a.onnx', '--family', 'birefnet', '--name', 'rmbg2'])).toMatchObject({
      action: 'add',
      positionals: ['a.onnx'],
      values: { family: 'birefnet', name: 'rmbg2' },
    });
    expect(run(['models', 'remove', 'rmbg2'])).toMatchObject({ group: 'models', action: 'remove', positionals: ['rmbg2'] });
    expect(usageError(['models', 'remove', 'a', 'b'])).toMatch(/models remove/);
  });

  it('parses `serve` with no options', () => {
    expect(run(['serve'])).toMatchObject({ group: 'serve', action: '', positionals: [], values: {} });
  });

  it('parses an operator command: group, action, --db and --json', () => {
    expect(run(['accounts', 'list', '--db', '/tmp/x.db', '--json'])).toMatchObject({
      group: 'accounts',
      action: 'list',
      positionals: [],
      values: { db: '/tmp/x.db', json: true },
    });
  });

  it('takes --name=value as well as --name value', () => {
    expect(run(['credits', 'grant', '--account=a@b.c', '--credits', '5', '--db=/tmp/x.db']).values).toEqual({
      account: 'a@b.c',
      credits: '5',
      db: '/tmp/x.db',
    });
  });

  it('keeps the last value of an option given twice', () => {
    expect(run(['usage', '--db', 'a.db', '--db', 'b.db']).values).toEqual({ db: 'b.db' });
  });

  it('takes the account of accounts disable/enable and the key of keys revoke as an argument', () => {
    expect(run(['accounts', 'disable', 'a@b.c', '--db', 'x.db'])).toMatchObject({ action: 'disable', positionals: ['a@b.c'] });
    expect(run(['accounts', 'enable', '--account', '7'])).toMatchObject({ action: 'enable', positionals: [], values: { account: '7' } });
    expect(run(['keys', 'revoke', 'rb-sk_abcdef', '--json'])).toMatchObject({ action: 'revoke', positionals: ['rb-sk_abcdef'], values: { json: true } });
  });

  it('takes --no-key on accounts create', () => {
    const args = run(['accounts', 'create', '--email', 'a@b.c', '--plan', 'pro', '--no-key']);
    expect(args.values).toEqual({ email: 'a@b.c', plan: 'pro', 'no-key': true });
  });

  it('parses remove: files and folders anywhere, the library options, and "--" before names starting with "-"', () => {
    const args = run(['remove', 'a.jpg', '--out', 'out', 'photos/', '--bg-color', '#fff', '--size', 'preview', '--crop', '1:1', '--', '-odd.png', '--format']);
    expect(args).toMatchObject({
      group: 'remove',
      action: '',
      positionals: ['a.jpg', 'photos/', '-odd.png', '--format'],
      values: { out: 'out', 'bg-color': '#fff', size: 'preview', crop: '1:1' },
    });
  });

  it('takes every library option on remove', () => {
    const line = ['remove', 'x', '--out', 'o'];
    for (const name of ['format', 'channels', 'bg-color', 'size', 'crop', 'padding', 'model']) line.push(`--${name}`, `v-${name}`);
    expect(run(line).values).toEqual({
      out: 'o',
      format: 'v-format',
      channels: 'v-channels',
      'bg-color': 'v-bg-color',
      size: 'v-size',
      crop: 'v-crop',
      padding: 'v-padding',
      model: 'v-model',
    });
  });
});

describe('usage errors', () => {
  it.each([
    [['frobnicate'], 'unknown command: frobnicate'],
    [['constructor'], 'unknown command: constructor'],
    [['accounts'], 'accounts needs one of: create, list, disable, enable'],
    [['accounts', '--db', 'x.db', 'list'], 'accounts needs one of: create, list, disable, enable'],
    [['keys', 'delete'], 'unknown command: keys delete'],
    [['plans'], 'plans needs one of: set, cancel, resume'],
    [['credits', 'spend'], 'unknown command: credits spend'],
  ])('%j: %s', (line, message) => {
    expect(usageError(line)).toBe(message);
  });

  it.each([
    [['accounts', 'list', '--foo'], 'unknown option --foo for "accounts list" (it takes --db, --database-url, --json)'],
    [['usage', '-x'], 'unknown option -x for "usage" (it takes --db, --database-url, --json, --account)'],
    [['usage', '--constructor'], 'unknown option --constructor for "usage" (it takes --db, --database-url, --json, --account)'],
    [['serve', '--port', '3000'], 'unknown option --port for "serve" (it takes no options)'],
    [['keys', 'list', '--email', 'a@b.c'], 'unknown option --email for "keys list" (it takes --db, --database-url, --json, --account)'],
    [
      ['remove', 'a.jpg', '--speed', '9'],
      'unknown option --speed for "remove" (it takes --out, --format, --channels, --quality, --dpi, --remove-background, --keep-alpha, --metadata, --color-space, --size, --effort, --bg-color, --bg-image-file, --bg-image-url, --bg-fit, --bg-blur, --bg-blur-mode, --crop, --padding, --scale, --position, --output-size, --max-width, --max-height, --margin, --area-padding, --fit, --snap, --reference-box, --roi, --shadow, --shadow-opacity, --outline-color, --outline-width, --outline-blur, --semitransparency, --despill, --model)',
    ],
  ])('%j: %s', (line, message) => {
    expect(usageError(line)).toBe(message);
  });

  it.each([
    [['accounts', 'list', '--db'], '--db needs a value'],
    [['keys', 'list', '--account', '--json'], '--account needs a value (write --account=--json for a value starting with "-")'],
    [['remove', 'a.jpg', '--out', '-o'], '--out needs a value (write --out=-o for a value starting with "-")'],
    [['usage', '--json=yes'], '--json takes no value'],
  ])('%j: %s', (line, message) => {
    expect(usageError(line)).toBe(message);
  });

  it.each([
    [['accounts', 'list', 'extra'], '"accounts list" takes no arguments besides its options, got: extra'],
    [['serve', 'now', 'please'], '"serve" takes no arguments besides its options, got: now please'],
    [['keys', 'revoke', 'a', 'b'], '"keys revoke" takes one key id or prefix, got also: b'],
    [['accounts', 'disable', '1', '2', '3'], '"accounts disable" takes one account, got also: 2 3'],
  ])('%j: %s', (line, message) => {
    expect(usageError(line)).toBe(message);
  });
});

describe('option values', () => {
  it('stringFlag gives the value or undefined', () => {
    const args = run(['usage', '--account', 'a@b.c']);
    expect(stringFlag(args, 'account')).toBe('a@b.c');
    expect(stringFlag(args, 'db')).toBeUndefined();
  });

  it('requiredFlag refuses a missing option', () => {
    expect(() => requiredFlag(run(['keys', 'list']), 'account')).toThrow(new UsageError('--account is required'));
    expect(requiredFlag(run(['keys', 'list', '--account', '3']), 'account')).toBe('3');
  });

  it('refuses an empty value', () => {
    expect(() => stringFlag(run(['usage', '--db=']), 'db')).toThrow(new UsageError('--db needs a value'));
    expect(() => requiredFlag(run(['remove', 'x', '--out=']), 'out')).toThrow(new UsageError('--out needs a value'));
  });

  it('booleanFlag says whether the option was given', () => {
    expect(booleanFlag(run(['usage', '--json']), 'json')).toBe(true);
    expect(booleanFlag(run(['usage']), 'json')).toBe(false);
  });

  it('treats reading an option the command does not declare as a bug, not a usage error', () => {
    const args = run(['keys', 'list', '--account', '1']);
    expect(() => stringFlag(args, 'email')).toThrow('"keys list" declares no string option --email');
    expect(() => booleanFlag(args, 'account')).toThrow('"keys list" declares no boolean option --account');
    expect(() => stringFlag(args, 'email')).not.toThrow(UsageError);
  });
});
