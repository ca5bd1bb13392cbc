/**
 * `bgone compat check URL KEY`, the compiled CLI against a real bgone: every remove.bg call it makes
 * is answered as that call's clients expect (exit 0, each line "ok"); with a wrong key they fail and
 * it says so (exit 1); its arguments are checked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, useCliFolder } from '../helpers/cli-process.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const dir = useCliFolder('bgone-compat-');
let ts: TestServer;

beforeAll(async () => {
  ts = await startTestServer({ plan: 'pro' });
});

afterAll(async () => {
  await ts?.close();
});

describe('bgone compat check', () => {
  it("every call answered as remove.bg's clients expect: exit 0", async () => {
    const before = (await ts.store.credits.balance(ts.accountId)).remaining;
    const run = await runCli(dir, ['compat', 'check', ts.url, ts.key]);
    expect(run.stderr).toBe('');
    const lines = run.stdout.split('\n').filter((l) => /^ {2}(ok|FAIL)/.test(l));
    expect(lines.length).toBeGreaterThanOrEqual(10);
    expect(
      lines.filter((l) => l.includes('FAIL')),
      run.stdout,
    ).toEqual([]);
    expect(run.stdout).toMatch(/(\d+) of \1 calls answered/);
    expect(run.code).toBe(0);
    const charged = before - (await ts.store.credits.balance(ts.accountId)).remaining;
    expect(charged).toBeGreaterThan(0);
    expect(charged).toBeLessThanOrEqual(8);
  });

  it('with a wrong key the calls fail, each line says why, exit 1', async () => {
    const run = await runCli(dir, ['compat', 'check', `${ts.url}/v1.0`, 'rb-sk_not-a-key']);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/FAIL .*\/v1\.0\/account/);
    expect(run.stdout).toContain('status 403');
  });

  it('needs a URL and a key', async () => {
    const run = await runCli(dir, ['compat', 'check', ts.url]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('needs the service URL and an API key');
  });
});
