/**
 * The line protocol between bench/pipeline.ts and its long-lived children (ort-inference.js,
 * pipeline-case.js): one JSON object per line each way. The parent writes a command, the child
 * answers with one message; a message of type 'error' carries `message`.
 *
 * LineChild is the parent's side, serveLines the child's.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';

export type Message = { type: string; message?: string } & Record<string, unknown>;

export class LineChild {
  private readonly queue: Message[] = [];
  private readonly waiters: Array<{ resolve: (m: Message) => void; reject: (e: Error) => void }> = [];
  private failure: Error | undefined;
  private closing = false;
  readonly name: string;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    this.name = path.basename(child.spawnargs.find((a) => a.endsWith('.js')) ?? 'child', '.js');
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
      let message: Message;
      try {
        message = JSON.parse(line) as Message;
      } catch {
        process.stderr.write(`[${this.name}] ${line}\n`);
        return;
      }
      const waiter = this.waiters.shift();
      if (waiter) waiter.resolve(message);
      else this.queue.push(message);
    });
    child.stderr.on('data', (c: Buffer) => process.stderr.write(c));
    child.on('error', (err) => this.fail(err));
    child.on('exit', (code, signal) => {
      if (!this.closing) this.fail(new Error(`${this.name} exited with ${code ?? signal}`));
    });
  }

  /** Starts `node [nodeArgs] script [args]` and waits for its first message, which must be of type 'ready'. */
  static async start<Ready extends Message>(script: string, args: string[], nodeArgs: string[] = []): Promise<{ child: LineChild; ready: Ready }> {
    const child = new LineChild(spawn(process.execPath, [...nodeArgs, script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] }));
    try {
      const ready = await child.next();
      if (ready.type !== 'ready') throw new Error(`${child.name} did not start: ${JSON.stringify(ready)}`);
      return { child, ready: ready as Ready };
    } catch (err) {
      child.kill();
      throw err;
    }
  }

  private fail(err: Error): void {
    this.failure ??= err;
    for (const w of this.waiters.splice(0)) w.reject(err);
  }

  private next(): Promise<Message> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** The child's process id (undefined if it could not be started). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Sends one command and returns the answer; an answer of type 'error' is thrown. */
  async request<T extends Message>(command: { cmd: string } & Record<string, unknown>): Promise<T> {
    if (this.failure) throw this.failure;
    this.child.stdin.write(`${JSON.stringify(command)}\n`);
    const answer = await this.next();
    if (answer.type === 'error') throw new Error(`${this.name}: ${answer.message ?? 'error'}`);
    return answer as T;
  }

  /** Asks the child to exit and waits for it (killed after 10 s). */
  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.closing = true;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin.end(`${JSON.stringify({ cmd: 'exit' })}\n`);
    const timer = setTimeout(() => this.child.kill(), 10_000);
    await exited;
    clearTimeout(timer);
  }

  kill(): void {
    this.closing = true;
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill();
  }
}

export const emit = (message: Message): void => {
  process.stdout.write(`${JSON.stringify(message)}\n`);
};

/**
 * The child's side: answers each stdin line with what `handle` returns, until {"cmd":"exit"} or the
 * end of stdin. A thrown error becomes an 'error' message; commands are handled one at a time.
 */
export async function serveLines(handle: (command: { cmd?: string } & Record<string, unknown>) => Promise<Message>): Promise<void> {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    let command: { cmd?: string } & Record<string, unknown>;
    try {
      command = JSON.parse(line) as typeof command;
    } catch {
      emit({ type: 'error', message: `not JSON: ${line.slice(0, 80)}` });
      continue;
    }
    if (command.cmd === 'exit') break;
    try {
      emit(await handle(command));
    } catch (err) {
      emit({ type: 'error', message: err instanceof Error ? err.message : String(err) });
    }
  }
  lines.close();
}
