/**
 * An in-memory request and a response that records what was sent, for unit tests of the modules
 * that only see the HttpRequest/HttpResponse interface (admission, router, exchange). The real
 * backends are tested on real sockets in test/http/backends.test.ts.
 */
import type { HttpRequest, HttpResponse, OutgoingHeaders } from '../../src/http/types.js';

export interface Sent {
  status: number;
  headers: OutgoingHeaders;
  body: string | Uint8Array;
}

export class RecordedResponse implements HttpResponse {
  aborted = false;
  sent = false;
  readonly answers: Sent[] = [];
  private readonly listeners: Array<() => void> = [];

  onAborted(listener: () => void): void {
    if (this.aborted) listener();
    else this.listeners.push(listener);
  }

  send(status: number, headers: OutgoingHeaders, body: string | Uint8Array): void {
    if (this.sent || this.aborted) return;
    this.sent = true;
    this.answers.push({ status, headers, body });
  }

  /** The client goes away. */
  abort(): void {
    if (this.aborted || this.sent) return;
    this.aborted = true;
    for (const listener of this.listeners.splice(0)) listener();
  }

  /** The one answer, its JSON body parsed. */
  get json(): any {
    const answer = this.answers[0];
    if (!answer) throw new Error('nothing was sent');
    return JSON.parse(String(answer.body));
  }

  get status(): number | undefined {
    return this.answers[0]?.status;
  }
}

export function memoryRequest(method: string, path: string, headers: Record<string, string> = {}, body: Uint8Array[] = []): HttpRequest {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return {
    method,
    path,
    query: '',
    remoteAddress: '127.0.0.1',
    header: (name) => lower[name] ?? '',
    onData(handler) {
      if (body.length === 0) handler(new Uint8Array(0), true);
      for (const [i, chunk] of body.entries()) handler(chunk, i === body.length - 1);
    },
  };
}
