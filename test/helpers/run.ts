import { type RemoveBackgroundOptions, type RemoveBackgroundResult, removeBackground } from './bgone.js';
import { decode, type Raw } from './image.js';

export interface Output {
  result: RemoveBackgroundResult;
  /** The encoded result decoded back with sharp. */
  image: Raw;
}

export async function run(input: Buffer, options: RemoveBackgroundOptions = {}): Promise<Output> {
  const result = await removeBackground(input, options);
  return { result, image: await decode(result.data) };
}

/**
 * Runs several jobs at once (the library queues them; decode and encode overlap inference) and
 * returns the outputs by name.
 */
export async function runAll<K extends string>(jobs: Record<K, [Buffer, RemoveBackgroundOptions?]>): Promise<Record<K, Output>> {
  const names = Object.keys(jobs) as K[];
  const outputs = await Promise.all(names.map((name) => run(jobs[name][0], jobs[name][1])));
  return Object.fromEntries(names.map((name, i) => [name, outputs[i]])) as Record<K, Output>;
}
