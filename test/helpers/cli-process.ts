/**
 * The compiled CLI (dist/src/cli/main.js, built by the global setup) as child processes: one-shot
 * commands run to completion, and `bgone serve` kept running with what it printed so far. Every
 * child started here is killed by killChildren() (call it in afterAll), so a failing test never
 * leaves a server behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { REPO_ROOT } from './paths.js';
import { waitFor } from './server.js';

export const CLI = join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js');

const children = new Set<ChildProcess>();

/**
 * For a test file running the CLI: a fresh temporary folder (returned) for its databases and files,
 * a check that the CLI was compiled, and after the file every child killed and the folder removed.
 */
export function useCliFolder(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  beforeAll(() => {
    expect(existsSync(CLI), `${CLI} (compiled by the global setup)`).toBe(true);
  });
  afterAll(() => {
    killChildren();
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Kills (SIGKILL) every child still running. */
export function killChildren(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  children.clear();
}

/** The environment of a child: ours without any BGONE_* setting, plus `extra`. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BGONE_') && k !== 'PORT' && k !== 'HOST'));
  return { ...base, ...extra };
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `node dist/src/cli/main.js ...args` in `cwd` to completion. */
export function runCli(cwd: string, args: string[], extraEnv: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env: childEnv(extraEnv), stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Resolves once a TCP connection to 127.0.0.1:`port` opens (then closes it); rejects when it is refused. */
export function connects(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

/** `bgone serve` as a child process, with what it printed so far. */
export class ServeProcess {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(cwd: string, extraEnv: Record<string, string>) {
    // An ephemeral metrics port unless a test names one: nodes side by side never meet on the default.
    const env = childEnv({ BGONE_METRICS_LISTEN: '127.0.0.1:0', ...extraEnv });
    this.child = spawn(process.execPath, [CLI, 'serve'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(this.child);
    this.child.stdout!.on('data', (d: Buffer) => (this.stdout += d.toString()));
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) => this.child.on('close', (code, signal) => resolve({ code, signal })));
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The JSON log lines printed so far. */
  logs(): Array<Record<string, any>> {
    return this.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, any>);
  }

  /**
   * Waits for the curl line printed with a first key and returns the key and the port it names. The
   * wait is as long as port()'s.
   */
  async curlLine(timeoutMs = 150_000): Promise<{ key: string; port: number }> {
    let match: RegExpExecArray | null = null;
    await waitFor(
      () => {
        match = /curl -H "Authorization: Bearer (\S+)" .* http:\/\/127\.0\.0\.1:(\d+)\/api\/v1\/remove\n/.exec(this.stdout);
        if (!match && !this.alive) throw new Error(`serve exited before printing a curl line:\n${this.stdout}\n${this.stderr}`);
        return match !== null;
      },
      'the curl line',
      timeoutMs,
    );
    return { key: match![1]!, port: Number(match![2]) };
  }

  /**
   * Waits for the "bgone listening on ..." log line and returns the port it names. The wait is
   * long: several nodes loading the model at once on a slow shared machine take a while.
   */
  async port(timeoutMs = 150_000): Promise<number> {
    let line: Record<string, any> | undefined;
    try {
      await waitFor(
        () => {
          if (!this.alive) throw new Error(`serve exited before listening:\n${this.stdout}\n${this.stderr}`);
          line = this.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('bgone listening on'));
          return line !== undefined;
        },
        'the listening log line',
        timeoutMs,
      );
    } catch (err) {
      (err as Error).message += `\nserve printed:\n${this.stdout.slice(-3000)}\n${this.stderr.slice(-3000)}`;
      throw err;
    }
    expect(line!.msg).toBe(`bgone listening on http://127.0.0.1:${line!.port}`);
    expect(line!.port).toBeGreaterThan(0);
    return line!.port as number;
  }
}
