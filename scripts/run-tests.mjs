#!/usr/bin/env node
/**
 * `npm test`: runs vitest once with the default reporter (on the console) and the JSON reporter
 * (test-results/vitest.json), then prints the totals as the very last line:
 *
 *   N passed, N failed[, N skipped]
 *
 * and exits with vitest's exit code. Extra arguments are passed on to vitest
 * (e.g. `npm test -- test/lib/options.test.ts` or `npm test -- --project unit`).
 *
 * Without arguments (the whole suite), the linters run first, each counted as one test in the
 * totals: Biome over the TypeScript, JavaScript and JSON, clang-format over native/, and tsc over
 * the tests, benches and tools with the sources (tsconfig.test.json). Their
 * findings are printed; a finding fails the run like a failing test.
 *
 * "failed" is the JSON's numFailedTests, plus one for each test file that failed without a failing
 * test (it did not load, or a hook failed), plus one if vitest exited non-zero with nothing else
 * failed (e.g. an unhandled error): a red run never reports 0 failed. If the JSON report is
 * missing (vitest crashed), the line is `0 passed, 1 failed` and the exit code 1.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const reportPath = join(root, 'test-results', 'vitest.json');

function vitestBin() {
  const require = createRequire(join(root, 'package.json'));
  const pkgPath = require.resolve('vitest/package.json');
  const { bin } = JSON.parse(readFileSync(pkgPath, 'utf8'));
  return join(dirname(pkgPath), typeof bin === 'string' ? bin : bin.vitest);
}

function runVitest(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [vitestBin(), 'run', ...args], { cwd: root, stdio: 'inherit' });
    const forward = (signal) => child.kill(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('error', (err) => {
      console.error(`cannot start vitest: ${err.message}`);
      resolve(1);
    });
    child.on('exit', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      if (signal) console.error(`vitest was killed by ${signal}`);
      resolve(code ?? 1);
    });
  });
}

/** Runs a linter (a bin of node_modules) with inherited output; resolves true when it passes. */
function runLinter(name, command, args) {
  return new Promise((resolve) => {
    const child = spawn(join(root, 'node_modules', '.bin', command), args, { cwd: root, stdio: 'inherit' });
    child.on('error', (err) => {
      console.error(`lint: cannot start ${name}: ${err.message}`);
      resolve(false);
    });
    child.on('exit', (code) => {
      console.log(`lint: ${name} ${code === 0 ? 'passed' : 'FAILED'}`);
      resolve(code === 0);
    });
  });
}

async function lint() {
  const results = [
    await runLinter('biome (TypeScript, JavaScript, JSON)', 'biome', ['check', '.']),
    await runLinter('clang-format (native/)', 'clang-format', [
      '--dry-run',
      '--Werror',
      ...readdirSync(join(root, 'native'))
        .filter((f) => /\.(cc|h)$/.test(f))
        .map((f) => join('native', f)),
    ]),
    // The tests, benches and tools are type-checked with the sources (tsconfig.test.json, no output):
    // vitest only strips types, so a test calling an API wrongly would otherwise still run.
    await runLinter('tsc (src, bench, tools, test)', 'tsc', ['-p', 'tsconfig.test.json']),
  ];
  return { passed: results.filter(Boolean).length, failed: results.filter((r) => !r).length };
}

function summarise(report, exitCode, linted) {
  const passed = (report.numPassedTests ?? 0) + linted.passed;
  let failed = (report.numFailedTests ?? 0) + linted.failed;
  const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  for (const file of report.testResults ?? []) {
    const failedInFile = (file.assertionResults ?? []).filter((t) => t.status === 'failed').length;
    if (file.status === 'failed' && failedInFile === 0) {
      console.error(`${relative(root, file.name)} failed outside any test: ${(file.message ?? '').split('\n')[0]}`);
      failed++;
    }
  }
  if (exitCode !== 0 && failed === 0) {
    console.error(`vitest exited with code ${exitCode} without a failing test (no test file matched, or an error outside the tests)`);
    failed = 1;
  }
  return `${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`;
}

const args = process.argv.slice(2);
mkdirSync(dirname(reportPath), { recursive: true });
rmSync(reportPath, { force: true }); // never read a previous run's report

const linted = args.length === 0 ? await lint() : { passed: 0, failed: 0 };
const vitestExit = await runVitest(['--reporter=default', '--reporter=json', `--outputFile.json=${reportPath}`, ...args]);

let report;
try {
  if (existsSync(reportPath)) report = JSON.parse(readFileSync(reportPath, 'utf8'));
} catch (err) {
  console.error(`cannot read ${relative(root, reportPath)}: ${err.message}`);
}
const exitCode = vitestExit !== 0 ? vitestExit : linted.failed > 0 ? 1 : 0;
if (!report) {
  console.log(`${linted.passed} passed, ${linted.failed + 1} failed`);
  process.exit(1);
}
console.log(summarise(report, vitestExit, linted));
process.exit(exitCode);
