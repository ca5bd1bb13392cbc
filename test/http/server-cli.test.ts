/**
 * The compiled command line (dist/src/cli/main.js, built by test/global-setup.ts) as an operator uses
 * it: `serve` on an empty database prints the first key once and serves with it, drains an
 * in-flight request on SIGTERM and exits 0, refuses a bad environment; the account, key, plan,
 * credit and usage commands; `remove` over a folder. Every process is a real child process.
 */
import { copyFileSync, existsSync, linkSync, mkdirSync, readdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cpuRunsAvx2 } from '../../src/lib/native.js';
import { openStore } from '../../src/store/index.js';
import { connects, runCli, ServeProcess, useCliFolder } from '../helpers/cli-process.js';
import { PHOTOS } from '../helpers/constants.js';
import { imageInfo } from '../helpers/http-images.js';
import { multipartBody, rawExchange, requestHead } from '../helpers/http-raw.js';
import { photoPath, readPhoto } from '../helpers/paths.js';
import { freshDatabase, testDatabaseUrl } from '../helpers/postgres.js';
import { get, postImage, waitFor } from '../helpers/server.js';

const KEY = /rb-sk_[A-Za-z0-9_-]{43}/g;
const teddy = readPhoto(PHOTOS.teddy);
const book = readPhoto(PHOTOS.book);

const dir = useCliFolder('bgone-cli-');

/** Runs `bgone ...args` in the test's folder to completion. */
const cli = (args: string[], extraEnv: Record<string, string> = {}) => runCli(dir, args, extraEnv);

/** `bgone serve` in the test's folder. */
class Serve extends ServeProcess {
  constructor(extraEnv: Record<string, string>) {
    super(dir, extraEnv);
  }
}

/** Every account's balance in the file, read by an operator store beside the service. */
async function ledger(db: string): Promise<unknown[]> {
  const store = await openStore({ path: db });
  try {
    return await Promise.all((await store.accounts.list()).map((a) => store.credits.balance(a.id)));
  } finally {
    await store.close();
  }
}

/** No form of the key's secret is anywhere in the database files. */
function expectNoSecretOnDisk(db: string, keys: string[]): void {
  for (const file of [db, `${db}-wal`, `${db}-shm`].filter((f) => existsSync(f))) {
    const bytes = readFileSync(file);
    for (const key of keys) {
      expect(bytes.includes(Buffer.from(key)), `key found in ${file}`).toBe(false);
      expect(bytes.includes(Buffer.from(key.slice(12, -4))), `hidden part of the key found in ${file}`).toBe(false);
    }
  }
}

describe('bgone serve', () => {
  let db: string;
  let firstKey: string;

  beforeAll(() => {
    db = join(dir, 'serve', 'db.sqlite');
  });

  it('on an empty database: prints a first key once, serves with it, and on SIGTERM finishes the request in flight, then exits 0', async () => {
    const serve = new Serve({ BGONE_DB: db, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
    try {
      // The curl line is printed once the server listens: pasted at once, it connects.
      const curl = await serve.curlLine();
      await connects(curl.port);
      const port = await serve.port();
      expect(curl.port).toBe(port);
      const url = `http://127.0.0.1:${port}`;
      const keys = [...new Set(serve.stdout.match(KEY) ?? [])];
      expect(keys, 'distinct keys printed').toHaveLength(1);
      firstKey = keys[0]!;
      expect(serve.stdout).toMatch(/shown only this once/);
      expect(
        serve.logs().some((l) => JSON.stringify(l).includes(firstKey)),
        'the key is never in a log line',
      ).toBe(false);

      const first = await postImage(url, firstKey, { size: 'preview' }, teddy);
      expect(first.status).toBe(200);
      expect(imageInfo(first.body)).toMatchObject({ format: 'png', width: 284, height: 398 });
      expect(first.headers.get('x-credits-remaining')).toBe('99');

      // A slower request (full size), then SIGTERM while it is in flight.
      const pending = postImage(url, firstKey, {}, book);
      await waitFor(async () => (await get(url, '/readyz')).json?.in_flight === 1, 'the request to be in flight');
      expect(serve.child.kill('SIGTERM')).toBe(true);
      const last = await pending;
      expect(last.status).toBe(200);
      expect(imageInfo(last.body)).toMatchObject({ format: 'png', width: 640, height: 480 });
      expect(last.headers.get('x-credits-charged')).toBe('1');
      const exit = await serve.exited;
      expect({ ...exit, stderr: serve.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
      const messages = serve.logs().map((l) => l.msg);
      expect(messages).toEqual(expect.arrayContaining(['model loaded', 'draining', 'stopped']));
      // The addon build in use is logged: the AVX2 one where this CPU runs it.
      expect(serve.logs().find((l) => l.msg === 'model loaded')?.addon).toBe(cpuRunsAvx2() ? 'bgone.avx2.addon' : 'bgone.node');
      expect(serve.logs().find((l) => l.msg === 'draining')?.inFlight).toBe(1);
      // Both requests were charged, and the key is not in the database file.
      const store = await openStore({ path: db });
      try {
        const account = await store.accounts.list();
        expect(account.map((a) => a.email)).toEqual(['local@localhost']);
        expect(await store.credits.balance(account[0]!.id)).toMatchObject({ used: 2, reserved: 0, remaining: 98 });
      } finally {
        await store.close();
      }
      expectNoSecretOnDisk(db, [firstKey]);
    } finally {
      if (serve.alive) serve.child.kill('SIGKILL');
    }
  });

  describe('a second start on the same database', () => {
    let serve: Serve;
    let url: string;

    beforeAll(async () => {
      serve = new Serve({ BGONE_DB: db, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
      url = `http://127.0.0.1:${await serve.port()}`;
    });

    afterAll(async () => {
      if (!serve.alive) return;
      serve.child.kill('SIGTERM');
      await Promise.race([serve.exited, new Promise((resolve) => setTimeout(resolve, 30_000))]);
      if (serve.alive) serve.child.kill('SIGKILL');
    });

    it('prints no key, and the first key still works', async () => {
      expect(firstKey, 'the first start printed a key').toBeDefined();
      expect(serve.stdout.match(KEY)).toBeNull();
      const res = await postImage(url, firstKey, { size: 'preview' }, teddy);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-credits-remaining')).toBe('97');
    });

    it('a third service on the same file refuses to start with a clear message, and the running one keeps its state', async () => {
      const third = await cli(['serve'], { BGONE_DB: db, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
      expect(third.code).toBe(1);
      expect(third.stderr).toMatch(new RegExp(`in use by another bgone service \\(pid ${serve.child.pid}`));
      expect(third.stdout).not.toMatch(/released credit reservations/);
      expect(serve.alive).toBe(true);
      expect((await get(url, '/readyz')).status).toBe(200);
    });

    it('a service through a symlink to the same file refuses to start too, naming the real file, and takes nothing of the running one', async () => {
      const link = join(dir, 'link-to-serve.sqlite');
      symlinkSync(db, link);
      const before = await ledger(db);
      const second = await cli(['serve'], { BGONE_DB: link, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`${link} (the file ${realpathSync(db)}) is in use by another bgone service (pid ${serve.child.pid}`);
      expect(second.stdout).not.toMatch(/released credit reservations|failed the batch images/);
      expect(await ledger(db)).toEqual(before);
      expect(serve.alive).toBe(true);
      expect((await get(url, '/readyz')).status).toBe(200);
    });

    it('a service through a hard link to the same file refuses to start too, and leaves a credit reservation in place', async () => {
      const hard = join(dir, 'elsewhere', 'hard-link.sqlite');
      mkdirSync(join(dir, 'elsewhere'), { recursive: true });
      linkSync(db, hard);
      // A reservation held in the file: a second service that started would release it at once.
      const operator = await openStore({ path: db });
      try {
        const [account] = await operator.accounts.list();
        const held = await operator.credits.reserve(account!.id, { requestId: 'req_held_by_first' });
        expect(held.ok).toBe(true);
        const before = await ledger(db);
        const second = new Serve({ BGONE_DB: hard, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
        const outcome = await Promise.race([
          second.exited,
          second.port().then(
            () => 'listening',
            () => 'exited',
          ),
        ]);
        if (second.alive) second.child.kill('SIGKILL');
        expect(outcome).toEqual({ code: 1, signal: null });
        expect(second.stderr).toContain(`${hard} is in use by another bgone service (pid ${serve.child.pid})`);
        expect(second.stdout).not.toMatch(/released credit reservations|failed the batch images/);
        expect(await ledger(db)).toEqual(before);
        expect(before).toEqual([expect.objectContaining({ reserved: 1 })]);
        if (held.ok && held.reservationId !== null) expect(await operator.credits.release(held.reservationId)).toBe(true);
      } finally {
        await operator.close();
      }
      expect(serve.alive).toBe(true);
      expect((await get(url, '/readyz')).status).toBe(200);
    });

    it('survives a multipart body that ends inside the image part (answers 400, keeps serving)', async () => {
      const full = multipartBody('CutBoundary', [{ name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', data: teddy }]);
      const cut = full.subarray(0, full.length - 40); // no closing boundary
      const res = await rawExchange(
        Number(new URL(url).port),
        Buffer.concat([Buffer.from(requestHead(firstKey, 'multipart/form-data; boundary=CutBoundary', cut.length)), cut]),
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect({ alive: serve.alive, stderr: serve.stderr.split('\n').slice(0, 8).join('\n') }, 'the serve process').toEqual({ alive: true, stderr: '' });
      expect({ status: res.status, code: res.json?.code }).toEqual({ status: 400, code: 'validation_error' });
      const health = await get(url, '/healthz').catch((err: Error) => ({ status: `unreachable: ${(err.cause as Error)?.message ?? err.message}` }));
      expect(health.status).toBe(200);
    });
  });

  it('after a service is killed with SIGKILL, the next start takes the lock the kernel released', async () => {
    const lockDb = join(dir, 'killed', 'db.sqlite');
    const first = new Serve({ BGONE_DB: lockDb, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
    await first.port();
    first.child.kill('SIGKILL');
    await first.exited;
    const next = new Serve({ BGONE_DB: lockDb, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
    try {
      const port = await next.port();
      expect((await get(`http://127.0.0.1:${port}`, '/healthz')).status).toBe(200);
    } finally {
      next.child.kill('SIGTERM');
      await next.exited;
    }
    // Free again after a clean stop too: a third start gets it.
    const third = new Serve({ BGONE_DB: lockDb, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
    try {
      await third.port();
    } finally {
      third.child.kill('SIGTERM');
      await third.exited;
    }
  });

  it('a bad environment value (BGONE_PORT=abc): exits non-zero with a clear message, before touching the database', async () => {
    const badDb = join(dir, 'bad', 'db.sqlite');
    const run = await cli(['serve'], { BGONE_DB: badDb, BGONE_PORT: 'abc' });
    expect(run.code).not.toBe(0);
    expect(run.code).not.toBeNull();
    expect(run.stderr).toMatch(/BGONE_PORT/);
    expect(run.stderr).toMatch(/"abc"/);
    expect(run.stdout.match(KEY)).toBeNull();
    expect(existsSync(badDb)).toBe(false);
  });

  it('other bad values are refused the same way (BGONE_QUEUE_LIMIT=0, BGONE_LOG_LEVEL=loud)', async () => {
    for (const [name, value] of [
      ['BGONE_QUEUE_LIMIT', '0'],
      ['BGONE_LOG_LEVEL', 'loud'],
    ]) {
      const run = await cli(['serve'], { BGONE_DB: join(dir, 'bad2', 'db.sqlite'), BGONE_PORT: '0', [name!]: value! });
      expect(run.code, name).not.toBe(0);
      expect(run.stderr).toContain(name!);
    }
  });
});

describe('operator commands', () => {
  let db: string;
  let key: string;

  beforeAll(() => {
    db = join(dir, 'admin', 'db.sqlite');
  });

  it('accounts create --email a@b.c --plan pro prints the account and a key', async () => {
    const run = await cli(['accounts', 'create', '--email', 'a@b.c', '--plan', 'pro', '--db', db]);
    expect(run.code, run.stderr).toBe(0);
    const printed = run.stdout.match(/API key \(shown once\): (rb-sk_[A-Za-z0-9_-]{43})$/m);
    expect(printed).not.toBeNull();
    key = printed![1]!;
    expect(run.stdout).toMatch(/a@b\.c/);
    expect(run.stdout).toMatch(/pro/);
    const store = await openStore({ path: db });
    try {
      const auth = await store.keys.authenticate(key);
      expect(auth).toMatchObject({ plan: 'pro' });
      expect(await store.accounts.get(auth!.accountId)).toMatchObject({ email: 'a@b.c', plan: 'pro' });
    } finally {
      await store.close();
    }
  });

  it('accounts create with a taken email fails with a message', async () => {
    const run = await cli(['accounts', 'create', '--email', 'A@B.C', '--db', db]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/already exists/);
    expect(run.stdout.match(KEY)).toBeNull();
  });

  it('accounts create with a malformed email fails with a message and creates nothing', async () => {
    for (const email of ['x@ex<b>ample.com', '"a"@example.com', 'a@example']) {
      const run = await cli(['accounts', 'create', '--email', email, '--db', db]);
      expect(run.code, email).toBe(1);
      expect(run.stderr).toMatch(/not a valid email address/);
      expect(run.stdout.match(KEY)).toBeNull();
    }
    const list = await cli(['accounts', 'list', '--json', '--db', db]);
    expect(JSON.parse(list.stdout).map((a: { email: string }) => a.email)).toEqual(['a@b.c']);
  });

  it('keys list shows the key by prefix and last 4, never the key', async () => {
    const run = await cli(['keys', 'list', '--account', 'a@b.c', '--json', '--db', db]);
    expect(run.code, run.stderr).toBe(0);
    const list = JSON.parse(run.stdout) as Array<Record<string, unknown>>;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ prefix: key.slice(0, 12), last4: key.slice(-4), revoked: false });
    expect(run.stdout).not.toContain(key.slice(12, -4));
  });

  it('keys create then keys revoke <prefix>: the revoked key no longer authenticates, the first still does', async () => {
    const created = await cli(['keys', 'create', '--account', 'a@b.c', '--db', db]);
    expect(created.code, created.stderr).toBe(0);
    const second = created.stdout.match(/API key \(shown once\): (rb-sk_[A-Za-z0-9_-]{43})$/m)![1]!;
    const run = await cli(['keys', 'revoke', second.slice(0, 12), '--json', '--db', db]);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ prefix: second.slice(0, 12), revoked: true });
    const store = await openStore({ path: db });
    try {
      expect(await store.keys.authenticate(second)).toBeNull();
      expect(await store.keys.authenticate(key)).not.toBeNull();
    } finally {
      await store.close();
    }
    const missing = await cli(['keys', 'revoke', 'rb-sk_zzzzzz', '--db', db]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no key/);
    expectNoSecretOnDisk(db, [key, second]);
  });

  it('plans set --plan ultra takes effect now; an unknown plan is refused', async () => {
    const run = await cli(['plans', 'set', '--account', 'a@b.c', '--plan', 'ultra', '--json', '--db', db]);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ email: 'a@b.c', plan: 'ultra' });
    const bad = await cli(['plans', 'set', '--account', 'a@b.c', '--plan', 'gold', '--db', db]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/free, pro, ultra, mega/);
  });

  it('credits grant adds to this cycle; credits balance shows it; a non-positive grant is refused', async () => {
    const run = await cli(['credits', 'grant', '--account', 'a@b.c', '--credits', '5', '--json', '--db', db]);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ plan: 'ultra', granted: 5, allowance: 50_005, used: 0, remaining: 50_005 });
    const balance = await cli(['credits', 'balance', '--account', '1', '--json', '--db', db]);
    expect(balance.code, balance.stderr).toBe(0);
    expect(JSON.parse(balance.stdout)).toMatchObject({ granted: 5, remaining: 50_005 });
    const bad = await cli(['credits', 'grant', '--account', 'a@b.c', '--credits', '0', '--db', db]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--credits/);
  });

  it('usage --json summarises accounts, keys and charges; usage --account shows one account by day', async () => {
    const run = await cli(['usage', '--json', '--db', db]);
    expect(run.code, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout);
    expect(summary).toMatchObject({
      accounts: { total: 1, disabled: 0, byPlan: { free: 0, pro: 0, ultra: 1, mega: 0 } },
      keys: { active: 1, revoked: 1 },
      charged: { last24h: 0, last30d: 0, total: 0 },
      inFlight: 0,
    });
    expect(summary.perAccount).toHaveLength(1);
    const one = await cli(['usage', '--account', 'a@b.c', '--json', '--db', db]);
    expect(one.code, one.stderr).toBe(0);
    const usage = JSON.parse(one.stdout);
    expect(usage.balance).toMatchObject({ plan: 'ultra', remaining: 50_005 });
    expect(usage.byDay.length).toBeGreaterThanOrEqual(28);
    expect(usage.byDay.every((d: { requests: number }) => d.requests === 0)).toBe(true);
  });

  it('webhooks list / deliveries / retry show the outbox and make a failed delivery due again', async () => {
    const store = await openStore({ path: db });
    let deliveryId: string;
    try {
      const account = await store.accounts.getByEmail('a@b.c');
      const { endpoint } = (await store.webhooks.create(account!.id, { url: 'https://hooks.example.com/x', description: 'cli', maxEndpoints: 5 }))!;
      expect(await store.webhooks.sendTest(account!.id, endpoint.id)).toBe(true);
      const [claimed] = await store.webhooks.claimDue(1, 60_000);
      await store.webhooks.recordAttempt(claimed!.id, { delivered: false, statusCode: 500, error: 'HTTP 500', nextAttemptAt: null, disableEndpoint: false });
      deliveryId = claimed!.id;
    } finally {
      await store.close();
    }
    const list = await cli(['webhooks', 'list', '--account', 'a@b.c', '--json', '--db', db]);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject([{ url: 'https://hooks.example.com/x', description: 'cli' }]);
    expect(list.stdout).not.toContain('whsec_');
    const deliveries = await cli(['webhooks', 'deliveries', '--json', '--db', db]);
    expect(deliveries.code, deliveries.stderr).toBe(0);
    expect(JSON.parse(deliveries.stdout)).toMatchObject([{ id: deliveryId, type: 'webhook.test', status: 'failed', attempts: 1, lastStatusCode: 500 }]);
    const retry = await cli(['webhooks', 'retry', deliveryId, '--db', db]);
    expect(retry.code, retry.stderr).toBe(0);
    const after = await cli(['webhooks', 'deliveries', '--account', 'a@b.c', '--json', '--db', db]);
    expect(JSON.parse(after.stdout)).toMatchObject([{ id: deliveryId, status: 'pending' }]);
    const missing = await cli(['webhooks', 'retry', 'msg_nope', '--db', db]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no delivery/);
  });
});

describe('bgone remove', () => {
  it('remove <folder> --out <dir> --size preview writes one cut-out per image', async () => {
    const input = join(dir, 'photos');
    const out = join(dir, 'out');
    mkdirSync(input, { recursive: true });
    copyFileSync(photoPath(PHOTOS.teddy), join(input, PHOTOS.teddy));
    copyFileSync(photoPath(PHOTOS.book), join(input, PHOTOS.book));
    const run = await cli(['remove', input, '--out', out, '--size', 'preview']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/2 of 2 images written/);
    expect(readdirSync(out).sort()).toEqual(['gc_book.png', 'gc_teddy.png']);
    expect(imageInfo(readFileSync(join(out, 'gc_teddy.png')))).toEqual({ format: 'png', width: 284, height: 398, channels: 4 });
    const bookOut = imageInfo(readFileSync(join(out, 'gc_book.png')));
    expect(bookOut.format).toBe('png');
    expect(bookOut.width * bookOut.height).toBeLessThanOrEqual(250_000);
    expect(Math.abs(bookOut.width / bookOut.height - 640 / 480)).toBeLessThan(0.01);
  });
});

describe('on PostgreSQL (BGONE_DATABASE_URL, --database-url)', () => {
  let database: { url: string; drop(): Promise<void> };

  beforeAll(async () => {
    database = await freshDatabase(await testDatabaseUrl());
  });

  afterAll(async () => {
    await database?.drop();
  });

  it('operator commands work against PostgreSQL, from the flag or the environment; --db beside a URL is refused', async () => {
    const created = await cli(['accounts', 'create', '--email', 'pg@example.com', '--plan', 'pro', '--database-url', database.url]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout.match(KEY)).toHaveLength(1);
    const balance = await cli(['credits', 'balance', '--account', 'pg@example.com', '--json'], { BGONE_DATABASE_URL: database.url });
    expect(balance.code, balance.stderr).toBe(0);
    expect(JSON.parse(balance.stdout)).toMatchObject({ plan: 'pro', remaining: 10_000, used: 0 });
    const both = await cli(['accounts', 'list', '--database-url', database.url, '--db', join(dir, 'x.db')]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--db/);
  });

  it('serve on PostgreSQL: prints the first key on an empty database, charges into PostgreSQL, and drains on SIGTERM', async () => {
    const fresh = await freshDatabase(await testDatabaseUrl());
    const serve = new Serve({ BGONE_DATABASE_URL: fresh.url, BGONE_PORT: '0', BGONE_HOST: '127.0.0.1', BGONE_LOG_LEVEL: 'info' });
    try {
      const curl = await serve.curlLine();
      await connects(curl.port);
      const url = `http://127.0.0.1:${await serve.port()}`;
      expect(url).toBe(`http://127.0.0.1:${curl.port}`);
      const key = serve.stdout.match(KEY)?.[0];
      expect(key, 'the first key').toBe(curl.key);
      expect(serve.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('bgone listening'))?.database).toBe('postgres');
      const res = await postImage(url, key!, { size: 'preview' }, teddy);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-credits-remaining')).toBe('99');
      const store = await openStore({ url: fresh.url, autoRecover: false });
      try {
        const [account] = await store.accounts.list();
        expect((await store.credits.balance(account!.id)).used).toBe(1);
      } finally {
        await store.close();
      }
      serve.child.kill('SIGTERM');
      expect((await serve.exited).code).toBe(0);
    } finally {
      if (serve.alive) serve.child.kill('SIGKILL');
      await fresh.drop();
    }
  });

  it('an unreachable database stops the start with a message that does not show the URL', async () => {
    const run = await cli(['serve'], { BGONE_DATABASE_URL: 'postgres://bgone:hunter2@127.0.0.1:1/bgone', BGONE_PORT: '0' });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/cannot open the PostgreSQL database/);
    expect(run.stderr).not.toMatch(/hunter2/);
  });
});
