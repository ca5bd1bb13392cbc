#!/usr/bin/env node
/** The bgone command line: the service, operator commands and local batch processing. */
import { adminCommand } from './cli/admin.js';
import { parseArgs, UsageError } from './cli/args.js';
import { removeCommand } from './cli/remove.js';
import { serveCommand } from './cli/serve.js';
import { BgoneError } from './errors.js';
import { StoreError } from './store/index.js';

const USAGE = `usage: bgone <command>

  serve                                     run the HTTP service (npm start)
  accounts create --email E [--plan P]      create an account and its first API key
  accounts list | disable A | enable A
  keys create --account A                   create an API key (shown once)
  keys list --account A
  keys revoke <key id or prefix>
  plans set --account A --plan P            free | pro | ultra | mega, effective now
  plans cancel | resume --account A         a paid plan stays until its cycle ends
  credits grant --account A --credits N     extra credits for the current cycle
  credits balance --account A
  usage [--account A]
  remove <files or folders> --out DIR       run the library locally over many images
        [--format png|jpg|webp] [--channels rgba|alpha] [--bg-color C] [--size S]
        [--crop true|W:H] [--padding 10%] [--model M]

A is an account id or e-mail. Operator commands use BGONE_DB (default data/bgone.db) or --db.
Add --json for machine-readable output.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const args = parseArgs(rest);
  switch (command) {
    case 'serve':
      return serveCommand();
    case 'remove':
      return removeCommand(args);
    case 'accounts':
    case 'keys':
    case 'plans':
    case 'credits':
    case 'usage':
      return adminCommand(command, args);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command: ${command}`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) console.error(`bgone: ${err.message}\n\n${USAGE}`);
    else if (err instanceof BgoneError || err instanceof StoreError) console.error(`bgone: ${err.message}`);
    else console.error(err);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
