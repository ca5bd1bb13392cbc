/**
 * The limiter in front of the native core (src/lib/limiter.ts): at most `concurrency` jobs at once,
 * the others in arrival order, a bound that can change while jobs run, and waiting jobs dropped by
 * their AbortSignal.
 */
import { describe, expect, it } from 'vitest';
import { Limiter } from '../../src/lib/limiter.js';

/** A job that runs until release() is called; records when it started. */
function gate(log: string[], name: string) {
  let release!: () => void;
  const done = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    job: async () => {
      log.push(name);
      await done;
      return name;
    },
    release,
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/**
 * The normal job `name` let into `limiter`, then a background job 'bg' queued behind it: where the
 * tests of the background job's minimum share start. `jobs` holds the normal job's run, for the
 * test to add the others it starts.
 */
async function backgroundBehind(limiter: Limiter, started: string[], name: string) {
  const normal = gate(started, name);
  const jobs = [limiter.run(normal.job)];
  await tick();
  const bg = gate(started, 'bg');
  const background = limiter.run(bg.job, 'background');
  return { normal, jobs, bg, background };
}

describe('Limiter', () => {
  it('runs at most `concurrency` jobs; the others wait and start in arrival order', async () => {
    const limiter = new Limiter(2);
    const started: string[] = [];
    const gates = ['a', 'b', 'c', 'd'].map((name) => gate(started, name));
    const results = gates.map((g) => limiter.run(g.job));
    await tick();
    expect(started).toEqual(['a', 'b']);
    expect({ size: limiter.size, pending: limiter.pending }).toEqual({ size: 4, pending: 2 });
    gates[1]!.release();
    await tick();
    expect(started).toEqual(['a', 'b', 'c']);
    gates[0]!.release();
    gates[2]!.release();
    gates[3]!.release();
    expect(await Promise.all(results)).toEqual(['a', 'b', 'c', 'd']);
    expect(limiter.size).toBe(0);
  });

  it('a job that fails frees its place, and its error reaches the caller', async () => {
    const limiter = new Limiter(1);
    const failing = limiter.run(async () => {
      throw new Error('boom');
    });
    const next = limiter.run(async () => 'next');
    await expect(failing).rejects.toThrow('boom');
    expect(await next).toBe('next');
    expect(limiter.size).toBe(0);
  });

  it('a job arriving just as a place frees up waits behind the jobs already waiting', async () => {
    const limiter = new Limiter(1);
    const started: string[] = [];
    const a = gate(started, 'a');
    const b = gate(started, 'b');
    const c = gate(started, 'c');
    const runs = [limiter.run(a.job), limiter.run(b.job)];
    await tick();
    a.release();
    runs.push(limiter.run(c.job)); // same turn as the release
    await tick();
    expect(started).toEqual(['a', 'b']);
    expect(limiter.size).toBe(2);
    b.release();
    c.release();
    await Promise.all(runs);
    expect(started).toEqual(['a', 'b', 'c']);
  });

  it('raising the bound starts waiting jobs at once; lowering it lets running jobs finish', async () => {
    const limiter = new Limiter(1);
    const started: string[] = [];
    const gates = ['a', 'b', 'c', 'd'].map((name) => gate(started, name));
    const runs = gates.map((g) => limiter.run(g.job));
    await tick();
    expect(started).toEqual(['a']);
    limiter.concurrency = 3;
    await tick();
    expect(started).toEqual(['a', 'b', 'c']);
    limiter.concurrency = 1;
    gates[0]!.release();
    gates[1]!.release();
    await tick();
    expect(started).toEqual(['a', 'b', 'c']); // c still runs: one job, the bound
    gates[2]!.release();
    await tick();
    expect(started).toEqual(['a', 'b', 'c', 'd']);
    gates[3]!.release();
    await Promise.all(runs);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses the bound %j', (bound) => {
    expect(() => new Limiter(bound)).toThrow(RangeError);
    expect(() => {
      new Limiter(1).concurrency = bound;
    }).toThrow(RangeError);
  });

  it('a background job waits while normal jobs wait, and goes in only when none does', async () => {
    const limiter = new Limiter(1);
    const started: string[] = [];
    const a = gate(started, 'a');
    const bg = gate(started, 'bg');
    const b = gate(started, 'b');
    const running = [limiter.run(a.job), limiter.run(bg.job, 'background'), limiter.run(b.job)];
    await tick();
    expect(started).toEqual(['a']);
    expect({ pending: limiter.pending, pendingNormal: limiter.pendingNormal }).toEqual({ pending: 2, pendingNormal: 1 });
    a.release();
    await tick();
    expect(started).toEqual(['a', 'b']); // the normal job that came later goes first
    b.release();
    await tick();
    expect(started).toEqual(['a', 'b', 'bg']);
    bg.release();
    expect(await Promise.all(running)).toEqual(['a', 'bg', 'b']);
  });

  it('a background job takes no free place while a normal job waits for one or runs', async () => {
    const limiter = new Limiter(2);
    const started: string[] = [];
    const [a, b, c] = ['a', 'b', 'c'].map((n) => gate(started, n));
    const bg = gate(started, 'bg');
    const running = [limiter.run(a!.job), limiter.run(b!.job), limiter.run(c!.job)];
    await tick();
    const background = limiter.run(bg.job, 'background');
    await tick();
    expect(started).toEqual(['a', 'b']);
    a!.release();
    await tick();
    expect(started).toEqual(['a', 'b', 'c']);
    b!.release();
    await tick();
    expect(started).toEqual(['a', 'b', 'c']); // a place is free, but c still runs
    c!.release();
    await tick();
    expect(started).toEqual(['a', 'b', 'c', 'bg']);
    bg.release();
    await Promise.all([...running, background]);
    expect(limiter.size).toBe(0);
  });

  it('a waiting job whose signal aborts is dropped: it never starts, rejects with the reason, and the next one takes its turn', async () => {
    const limiter = new Limiter(1);
    const started: string[] = [];
    const [a, b, c] = ['a', 'b', 'c'].map((n) => gate(started, n));
    const controller = new AbortController();
    const first = limiter.run(a!.job);
    const dropped = limiter.run(b!.job, 'normal', controller.signal);
    const third = limiter.run(c!.job);
    await tick();
    expect({ size: limiter.size, pending: limiter.pending }).toEqual({ size: 3, pending: 2 });
    const reason = new Error('the client went away');
    controller.abort(reason);
    await expect(dropped).rejects.toBe(reason);
    expect({ size: limiter.size, pending: limiter.pending }).toEqual({ size: 2, pending: 1 });
    a!.release();
    await tick();
    expect(started).toEqual(['a', 'c']); // b never ran
    c!.release();
    expect(await Promise.all([first, third])).toEqual(['a', 'c']);
    expect(limiter.size).toBe(0);
  });

  it('a background job is dropped the same way; without a reason the rejection is an AbortError', async () => {
    const limiter = new Limiter(1);
    const started: string[] = [];
    const a = gate(started, 'a');
    const bg = gate(started, 'bg');
    const controller = new AbortController();
    const first = limiter.run(a.job);
    const dropped = limiter.run(bg.job, 'background', controller.signal);
    await tick();
    controller.abort();
    await expect(dropped).rejects.toMatchObject({ name: 'AbortError' });
    expect(limiter.pending).toBe(0);
    a.release();
    await first;
    expect(started).toEqual(['a']);
    expect(limiter.size).toBe(0);
  });

  it('an already aborted signal refuses the job at once; a signal aborted once the job runs changes nothing', async () => {
    const limiter = new Limiter(1);
    const started: string[] = [];
    const aborted = AbortSignal.abort(new Error('gone before it came'));
    await expect(limiter.run(gate(started, 'never').job, 'normal', aborted)).rejects.toThrow('gone before it came');
    expect(limiter.size).toBe(0);

    const a = gate(started, 'a');
    const controller = new AbortController();
    const running = limiter.run(a.job, 'normal', controller.signal);
    await tick();
    controller.abort();
    a.release();
    expect(await running).toBe('a'); // inside: it runs to its end
    expect(started).toEqual(['a']);
    expect(limiter.size).toBe(0);
  });

  it('a job let in just as its signal aborts still runs, and is counted exactly once', async () => {
    const limiter = new Limiter(1);
    const started: string[] = [];
    const a = gate(started, 'a');
    const b = gate(started, 'b');
    const controller = new AbortController();
    const first = limiter.run(a.job);
    const second = limiter.run(b.job, 'normal', controller.signal);
    await tick();
    // The release wakes b synchronously when a's job settles; the abort comes right after.
    a.release();
    await first;
    controller.abort();
    await tick();
    expect(started).toEqual(['a', 'b']);
    expect(limiter.size).toBe(1);
    b.release();
    expect(await second).toBe('b');
    expect(limiter.size).toBe(0);
  });

  it('with a grace, a background job waits until no normal job has ended for that long', async () => {
    const limiter = new Limiter(1, 60);
    const started: string[] = [];
    const a = gate(started, 'a');
    const bg = gate(started, 'bg');
    const first = limiter.run(a.job);
    await tick();
    const background = limiter.run(bg.job, 'background');
    a.release();
    await first;
    await tick();
    expect(started).toEqual(['a']); // the place is free, but the grace holds the background job back
    const b = gate(started, 'b');
    const second = limiter.run(b.job); // a normal job arriving within the grace goes first
    await tick();
    expect(started).toEqual(['a', 'b']);
    b.release();
    await second;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(started).toEqual(['a', 'b', 'bg']);
    bg.release();
    await background;
    expect(limiter.size).toBe(0);
  });

  it('with a grace, a background job that arrives on an idle limiter within the grace still starts once it is over', async () => {
    const limiter = new Limiter(2, 30);
    const started: string[] = [];
    const a = gate(started, 'a');
    const first = limiter.run(a.job);
    a.release();
    await first;
    const bg = gate(started, 'bg');
    const background = limiter.run(bg.job, 'background');
    await tick();
    expect(started).toEqual(['a']);
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(started).toEqual(['a', 'bg']);
    bg.release();
    await background;
  });

  it('under continuous normal traffic a background job goes in after `backgroundEvery` normal jobs passed it (its minimum share)', async () => {
    const limiter = new Limiter(1, 0, 3);
    const started: string[] = [];
    const { normal: first, jobs, bg, background } = await backgroundBehind(limiter, started, 'n0');
    // Normal jobs keep arriving, always one waiting: without the share the background job never starts.
    const normals = [first];
    for (let i = 1; i <= 5; i++) {
      const g = gate(started, `n${i}`);
      normals.push(g);
      jobs.push(limiter.run(g.job));
      normals[i - 1]!.release();
      await tick();
      if (started.includes('bg')) break;
    }
    // n0 was inside before the background job came; n1, n2, n3 passed it; then it goes first,
    // though n4 waits.
    expect(started).toEqual(['n0', 'n1', 'n2', 'n3', 'bg']);
    expect(limiter.pendingNormal).toBe(1);
    bg.release();
    await tick();
    expect(started).toEqual(['n0', 'n1', 'n2', 'n3', 'bg', 'n4']); // a normal job waited behind one background job only
    for (const g of normals) g.release();
    await Promise.all([...jobs, background]);
    expect(limiter.size).toBe(0);
  });

  it('a background job whose share is due takes the next free place beside a running normal job; the normal job behind it waits for that one only', async () => {
    const limiter = new Limiter(2, 0, 2);
    const started: string[] = [];
    const { normal: long, jobs, bg, background } = await backgroundBehind(limiter, started, 'long');
    const short = [gate(started, 's1'), gate(started, 's2'), gate(started, 's3')];
    jobs.push(limiter.run(short[0]!.job));
    await tick();
    jobs.push(limiter.run(short[1]!.job));
    short[0]!.release();
    await tick();
    expect(started).toEqual(['long', 's1', 's2']); // two normal jobs passed it: its share is due
    jobs.push(limiter.run(short[2]!.job));
    await tick();
    expect(started).toEqual(['long', 's1', 's2']);
    short[1]!.release();
    await tick();
    expect(started).toEqual(['long', 's1', 's2', 'bg']); // beside 'long', before s3
    bg.release();
    await tick();
    expect(started).toEqual(['long', 's1', 's2', 'bg', 's3']);
    long.release();
    short[2]!.release();
    await Promise.all([...jobs, background]);
    expect(limiter.size).toBe(0);
    expect(() => new Limiter(1, 0, 0)).toThrow(RangeError);
  });
});
