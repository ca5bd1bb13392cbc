#!/usr/bin/env node
/** The bgone command line: the service, operator commands and local batch processing. */

import { ConfigError, loadLibraryConfig } from '../config/config.js';
import { BgoneError } from '../lib/errors.js';
import { configure } from '../lib/index.js';
import { StoreError } from '../store/index.js';
import { adminCommand } from './admin.js';
import { parseCommandLine, UsageError } from './args.js';
import { compatCommand } from './compat.js';
import { gpuCommand } from './gpu.js';
import { modelsCommand } from './models.js';
import { REMOVE_FLAGS_HELP, removeCommand } from './remove.js';
import { serveCommand } from './serve.js';

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
  webhooks list --account A                 an account's webhook endpoints
  webhooks deliveries [--account A] [--limit N]   recent webhook deliveries (all accounts without A)
  webhooks retry <delivery id>              send a failed or pending delivery again now
  models list                               every model: family, size, licence, installed, default
  models add <name...>                      install more models (npm install puts only the default;
                                            BGONE_MODELS=a,b at install time asks for others)
  models add FILE --family F [--name N] [--license TEXT] [--source TEXT] [--data FILE] [--trust]
                                            add an ONNX model of family F (docs/models.md): its graph
                                            checked against the family and bgone's bounds, its test runs
                                            in a child process; --data: its external data file, where
                                            it is not beside FILE; --trust: other operators too
  models remove <name>                      remove a model added from a file
  gpu install [--dir DIR] [--dry-run]       install the CUDA route's ONNX Runtime 1.29 and its CUDA
                                            provider from npm (default DIR: the package's .gpu/)
  compat check URL KEY [--image FILE]       call a bgone as remove.bg's clients do, print each call
                                            and its answer (charges up to 8 credits)
  remove <files or folders> --out DIR       run the library locally over many images, with:
${REMOVE_FLAGS_HELP}

A is an account id or e-mail. Operator commands use BGONE_DB (default data/bgone.db) or --db,
or PostgreSQL with BGONE_DATABASE_URL or --database-url.
Add --json for machine-readable output.`;

async function main(argv: string[]): Promise<number> {
  const parsed = parseCommandLine(argv);
  if (parsed.kind === 'help') {
    console.log(USAGE);
    return parsed.requested ? 0 : 2; // a bare `bgone` is a usage mistake; `bgone --help` is not
  }
  switch (parsed.group) {
    case 'serve':
      return serveCommand();
    case 'remove':
      configure(loadLibraryConfig()); // BGONE_MODELS_DIR, _INFERENCE_THREADS, _NATIVE_CONCURRENCY, _EXECUTION_PROVIDER, _CUDA_MEM_LIMIT_MB, _TENSORRT_CACHE_DIR, _WEBGPU_CPU_ADAPTER, _ORT_LIBRARY, _ADDON_BUILD, _FETCH_ALLOW_PRIVATE, _FETCH_ALLOW
      return removeCommand(parsed);
    case 'models':
      return modelsCommand(parsed);
    case 'gpu':
      return gpuCommand(parsed);
    case 'compat':
      return compatCommand(parsed);
    case 'accounts':
    case 'keys':
    case 'plans':
    case 'credits':
    case 'usage':
    case 'webhooks':
      return adminCommand(parsed.group, parsed);
    default:
      throw new UsageError(`unknown command: ${parsed.group}`); // parseCommandLine knows no other
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) console.error(`bgone: ${err.message}\n\n${USAGE}`);
    else if (err instanceof ConfigError) console.error(`bgone: invalid configuration: ${err.message}`);
    else if (err instanceof BgoneError || err instanceof StoreError) console.error(`bgone: ${err.message}`);
    else console.error(err);
    process.exitCode = err instanceof UsageError || err instanceof ConfigError ? 2 : 1;
  },
);
