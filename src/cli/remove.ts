/**
 * `bgone remove <files or folders> --out DIR`: runs the library locally over many images with the
 * same options as the API, showing a progress bar on stderr. Folders are searched recursively for
 * .jpg, .jpeg, .png and .webp files. Output files keep the input's name with the format's extension.
 */
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, extname, join, resolve } from 'node:path';
import { BgoneError, type RemoveBackgroundOptions, removeBackground } from '../lib/index.js';
import { cliFlag, type OptionRow, optionsFor } from '../lib/option-table.js';
import { prepareShared } from '../lib/prepare-request.js';
import { type ParsedArgs, requiredFlag, stringFlag, UsageError } from './args.js';

const IMAGE_EXTENSIONS = new Set(['.jpg', '.jpeg', '.png', '.webp']);
const OUTPUT_EXTENSIONS = { png: '.png', jpg: '.jpg', webp: '.webp', avif: '.avif', zip: '.zip' } as const;

/** One help line per option the command line takes (the option table's CLI rows). */
export const REMOVE_FLAGS_HELP = optionsFor('cli')
  .map((row) => {
    const flag = `--${cliFlag(row)} ${row.part === 'file' ? 'FILE' : row.example}`;
    return `        ${flag.padEnd(34)} ${row.description.split('. ')[0]!.replace(/\.$/, '')}`;
  })
  .join('\n');

/** The library's options from the flags: a file row's flag names a file, read here. */
function optionsFromFlags(args: ParsedArgs): RemoveBackgroundOptions {
  const options: Record<string, unknown> = {};
  for (const row of optionsFor('cli') as OptionRow[]) {
    const value = stringFlag(args, cliFlag(row));
    if (value === undefined) continue;
    if (row.part === 'file') {
      try {
        options[row.key] = readFileSync(value);
      } catch (err) {
        throw new UsageError(`--${cliFlag(row)}: ${value} cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      }
    } else options[row.key] = value;
  }
  return options as RemoveBackgroundOptions;
}

function collect(paths: string[]): string[] {
  const files: string[] = [];
  const visit = (path: string) => {
    const st = statSync(path);
    if (st.isDirectory()) {
      for (const name of readdirSync(path).sort()) visit(join(path, name));
    } else if (IMAGE_EXTENSIONS.has(extname(path).toLowerCase())) files.push(path);
  };
  for (const p of paths) visit(resolve(p));
  return files;
}

function progress(done: number, total: number, failed: number, started: number): void {
  if (!process.stderr.isTTY) return;
  const width = 30;
  const filled = total ? Math.round((done / total) * width) : width;
  const elapsed = (Date.now() - started) / 1000;
  const eta = done ? Math.round((elapsed / done) * (total - done)) : 0;
  process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}${failed ? ` (${failed} failed)` : ''} eta ${eta}s `);
}

export async function removeCommand(args: ParsedArgs): Promise<number> {
  if (args.positionals.length === 0) throw new UsageError('remove needs at least one file or folder');
  const out = resolve(requiredFlag(args, 'out'));
  // Fail before reading any file, and once for them all: the options, and the background (by URL
  // downloaded once for every image), its header and its data.
  const shared = await prepareShared(optionsFromFlags(args), { owned: true });
  const files = collect(args.positionals);
  if (files.length === 0) throw new UsageError('no .jpg, .jpeg, .png or .webp files found');
  mkdirSync(out, { recursive: true });
  const started = Date.now();
  let done = 0;
  let failed = 0;
  progress(0, files.length, 0, started);
  // Two files in flight keep the native core busy (one decoding/encoding while the other infers).
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const file = files[next++]!;
      try {
        const result = await removeBackground(shared.job(readFileSync(file)));
        const target = join(out, basename(file, extname(file)) + OUTPUT_EXTENSIONS[result.format]);
        writeFileSync(target, result.data);
      } catch (err) {
        failed++;
        const reason = err instanceof BgoneError ? `${err.code}: ${err.message}` : String(err);
        process.stderr.write(`\n${file}: ${reason}\n`);
      }
      done++;
      progress(done, files.length, failed, started);
    }
  };
  await Promise.all([worker(), worker()]);
  if (process.stderr.isTTY) process.stderr.write('\n');
  console.log(
    `${done - failed} of ${files.length} images written to ${out} in ${((Date.now() - started) / 1000).toFixed(1)} s${failed ? `, ${failed} failed` : ''}`,
  );
  return failed ? 1 : 0;
}
