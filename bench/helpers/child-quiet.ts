/**
 * Waits until another process has stopped using the CPU: the bench times one engine at a time.
 *
 * Why: onnxruntime-node's defaults let its intra-op threads spin once a run is over, and they do.
 * Right after the bare-inference child answered, its threads went on burning 12-25 ms of CPU over
 * the next 23-41 ms (2 cores, the default model), which is when the case child's measured call
 * started: its full JPEG decode at 12 MP took 44-49 instead of 37-43 ms. So each call waits until
 * the other child's CPU time stands still.
 *
 * The CPU time is the sum over the process's threads of /proc/<pid>/task/<tid>/schedstat (ns).
 * Where /proc is missing (not Linux), it waits a fixed FALLBACK_MS instead.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Quiet: less than QUIET_CPU_MS of CPU over the last QUIET_WINDOW_MS. */
const QUIET_WINDOW_MS = 20;
const QUIET_CPU_MS = 0.5;
const POLL_MS = 2;
/** The longest wait: a child that never goes quiet (a busy machine) does not stop the bench. */
const MAX_WAIT_MS = 500;
const FALLBACK_MS = 50;

/** The process's CPU time so far (ms), every thread; undefined where /proc cannot tell. */
export function processCpuMs(pid: number): number | undefined {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  let ns = 0;
  for (const tid of tasks) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended between the listing and the read: its time is gone from the sum either way
    }
  }
  return ns / 1e6;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves once `pid` has been quiet for QUIET_WINDOW_MS; returns how long it waited (ms). An
 * unknown pid (a child that did not start) gets the fixed wait. */
export async function waitUntilQuiet(pid: number | undefined): Promise<number> {
  const start = performance.now();
  if (pid === undefined || processCpuMs(pid) === undefined) {
    await sleep(FALLBACK_MS);
    return performance.now() - start;
  }
  // The samples of the last window, and the newest one at least a window old first.
  const samples: Array<{ at: number; cpu: number }> = [];
  for (;;) {
    const at = performance.now();
    const cpu = processCpuMs(pid);
    if (cpu === undefined) break; // it exited
    samples.push({ at, cpu });
    while (samples.length > 1 && samples[1]!.at <= at - QUIET_WINDOW_MS) samples.shift();
    const before = samples[0]!;
    if (before.at <= at - QUIET_WINDOW_MS && cpu - before.cpu < QUIET_CPU_MS) break;
    if (at - start >= MAX_WAIT_MS) break;
    await sleep(POLL_MS);
  }
  return performance.now() - start;
}
