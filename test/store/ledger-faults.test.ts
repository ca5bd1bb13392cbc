/**
 * The ledger under a node's death at full metering speed, on a real PostgreSQL: 4 node processes
 * (each its own store, loaded from dist/) run the metering path (authenticate, rate limit, reserve,
 * then charge, or release for a request that fails) as fast as they can over 20 accounts of 100
 * credits, some requests under an Idempotency-Key that other nodes send too. One node is killed
 * (SIGKILL) mid-run and a new one started in its place. Each node reports every answer on stdout
 * the moment it has it: per account, what the answers say is then compared with the ledger.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/paths.js';
import { createTestDatabase } from '../helpers/store.js';

const DIST_STORE_URL = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'store', 'index.js')).href;
const ACCOUNTS = 20;
const CREDITS = 100; // the Free plan's
const NODES = 4;
const IN_FLIGHT = 8;
/** Short, so that the killed node's reservations come back within the test. */
const LAPSE_MS = 1000;

/**
 * One node. Lines on stdout: `ready`; then per request `C id` before its charge is sent, and its
 * answer: `S account id` (charged), `N id` (its charge found no reservation: answered 503,
 * uncharged), `F id` (failed: released), `R account id` (an Idempotency-Key replay: served, not
 * charged), `P id` (refused: no credits, or the key in flight). Runs until `stop` on stdin.
 */
const NODE = `
import { writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
const { openStore } = await import(process.env.LEDGER_STORE_URL);
const input = JSON.parse(process.env.LEDGER_NODE_INPUT);
const store = await openStore({ url: input.url, heartbeatLapseMs: ${LAPSE_MS}, rateLimits: { free: 1000000 } });
const say = (line) => {
  const bytes = Buffer.from(line + '\\n');
  for (let off = 0; off < bytes.length; ) {
    try { off += writeSync(1, bytes, off); } catch (err) { if (err.code !== 'EAGAIN') throw err; }
  }
};
let stopping = false;
const lines = createInterface({ input: process.stdin });
const go = new Promise((resolve) => lines.on('line', (l) => { if (l === 'go') resolve(); if (l === 'stop') stopping = true; }));
say('ready');
await go;
let n = 0;
async function one() {
  const i = n++;
  const id = 'req_' + input.tag + '_' + i;
  const a = (i * 7 + input.seed) % input.keys.length;
  const idem = i % 10 === 0 ? { idempotencyKey: 'idem-' + a + '-' + (i % 3), imageHash: 'h' + a } : {};
  const auth = await store.keys.authenticate(input.keys[a]);
  if (!auth) throw new Error('a key did not authenticate');
  const rate = await store.rateLimits.take('key:' + auth.keyId, auth.rateLimitPerMinute);
  if (!rate.allowed) throw new Error('rate-limited');
  const r = await store.credits.reserve(auth.accountId, { requestId: id, keyId: auth.keyId, ...idem });
  if (!r.ok) return say('P ' + id);
  if (r.alreadyCharged) return say('R ' + auth.accountId + ' ' + id);
  if (i % 5 === 1) {
    await store.credits.release(r.reservationId);
    return say('F ' + id);
  }
  say('C ' + id);
  const charged = await store.credits.commit(r.reservationId);
  say((charged ? 'S ' + auth.accountId + ' ' : 'N ') + id);
}
await Promise.all(Array.from({ length: ${IN_FLIGHT} }, async () => { while (!stopping) await one(); }));
await store.close();
say('closed');
process.exit(0);
`;

interface Node {
  child: ChildProcess;
  lines: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startNode(url: string, keys: string[], tag: string, seed: number): Promise<Node> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', NODE], {
    env: { ...process.env, LEDGER_STORE_URL: DIST_STORE_URL, LEDGER_NODE_INPUT: JSON.stringify({ url, keys, tag, seed }) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const node: Node = {
    child,
    lines: [],
    exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))),
  };
  let partial = '';
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      const text = partial + d.toString();
      const parts = text.split('\n');
      partial = parts.pop()!;
      for (const line of parts) {
        node.lines.push(line);
        if (line === 'ready') resolve(node);
      }
    });
    void node.exited.then(({ code, signal }) => reject(new Error(`node ${tag} exited (${code ?? signal}) before it was ready: ${stderr}`)));
  });
}

const count = (node: Node, kind: string) => node.lines.filter((l) => l.startsWith(`${kind} `)).length;

describe('the ledger when a node dies at full metering speed', () => {
  const running: Node[] = [];
  afterAll(() => {
    for (const node of running) node.child.kill('SIGKILL');
  });

  it('4 nodes over 20 accounts, one killed and replaced: per account the successes answered are the credits charged, never above the balance, and no reservation is left after the lapse', async () => {
    const database = await createTestDatabase();
    const db = new pg.Client({ connectionString: database.url });
    try {
      const { openStore } = await import('../../src/store/index.js');
      const setup = await openStore({ url: database.url, autoRecover: false });
      const keys: string[] = [];
      const accountIds: number[] = [];
      try {
        for (let i = 0; i < ACCOUNTS; i++) {
          const account = await setup.accounts.create({ email: `fault${i}@example.com` });
          accountIds.push(account.id);
          keys.push((await setup.keys.create(account.id)).key);
        }
      } finally {
        await setup.close();
      }
      await db.connect();
      const charges = async () => Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM charges')).rows[0]!.n);

      const nodes = await Promise.all(Array.from({ length: NODES }, (_, i) => startNode(database.url, keys, `n${i}`, i)));
      running.push(...nodes);
      for (const node of nodes) node.child.stdin!.write('go\n');

      // Mid-run: a quarter of all credits charged.
      const deadline = Date.now() + 30_000;
      while ((await charges()) < (ACCOUNTS * CREDITS) / 4 && Date.now() < deadline) await sleep(20);
      const victim = nodes[0]!;
      victim.child.kill('SIGKILL');
      expect((await victim.exited).signal).toBe('SIGKILL');
      const chargedAtKill = await charges();
      expect(chargedAtKill).toBeLessThan(ACCOUNTS * CREDITS);
      const replacement = await startNode(database.url, keys, 'n4', 4);
      running.push(replacement);
      replacement.child.stdin!.write('go\n');

      // Every credit charged in the end: the victim's reservations came back after its lapse.
      while ((await charges()) < ACCOUNTS * CREDITS && Date.now() < deadline + 20_000) await sleep(50);
      const live = [...nodes.slice(1), replacement];
      for (const node of live) node.child.stdin!.write('stop\n');
      for (const node of live) expect(await node.exited).toEqual({ code: 0, signal: null });
      const all = [victim, ...live];

      // The charges whose answer died with the victim: their charge was sent, no answer came back.
      const answered = new Set(all.flatMap((node) => node.lines.filter((l) => /^[SN] /.test(l)).map((l) => l.split(' ').at(-1)!)));
      const inDoubt = victim.lines
        .filter((l) => l.startsWith('C '))
        .map((l) => l.slice(2))
        .filter((id) => !answered.has(id));
      expect(inDoubt.length).toBeLessThanOrEqual(IN_FLIGHT);

      const { rows: ledger } = await db.query<{ account_id: string; request_id: string }>('SELECT account_id, request_id FROM charges');
      const chargedIds = new Set(ledger.map((r) => r.request_id));
      expect(chargedIds.size).toBe(ledger.length); // no request charged twice
      const chargedInDoubt = new Set(inDoubt.filter((id) => chargedIds.has(id)));

      for (const accountId of accountIds) {
        const successes = all.flatMap((node) => node.lines.filter((l) => l.startsWith(`S ${accountId} `)).map((l) => l.split(' ')[2]!));
        const charged = ledger.filter((r) => Number(r.account_id) === accountId).map((r) => r.request_id);
        // Every success answered is charged; every charge is a success answered, or one whose answer died with the victim.
        expect(successes.every((id) => chargedIds.has(id))).toBe(true);
        expect(charged.filter((id) => !chargedInDoubt.has(id)).sort()).toEqual([...successes].sort());
        expect(charged.length).toBe(CREDITS);
      }
      // Replays under an Idempotency-Key were served and never charged; failed and refused requests never charged.
      for (const node of all)
        for (const line of node.lines.filter((l) => /^[RFNP] /.test(l))) expect(chargedIds.has(line.split(' ').at(-1)!), line).toBe(false);
      expect(all.reduce((n, node) => n + count(node, 'R'), 0)).toBeGreaterThan(0);
      // The victim was killed mid-run, and the others charged after it.
      expect(count(victim, 'S')).toBeGreaterThan(0);
      expect(ACCOUNTS * CREDITS - chargedAtKill).toBeGreaterThan(0);
      expect(count(replacement, 'S') + live.slice(0, -1).reduce((n, node) => n + count(node, 'S'), 0)).toBeGreaterThan(0);
      // Nothing held: the victim's reservations were released once its heartbeat lapsed.
      expect((await db.query<{ n: string }>('SELECT count(*) AS n FROM reservations')).rows[0]!.n).toBe('0');
      const usage = await db.query<{ used: number }>('SELECT used FROM cycle_usage ORDER BY account_id');
      expect(usage.rows.map((r) => Number(r.used))).toEqual(accountIds.map(() => CREDITS));
    } finally {
      await db.end().catch(() => {});
      await database.drop();
    }
  });
});
