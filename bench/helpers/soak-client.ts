/**
 * The soak benchmark's HTTP client: raw HTTP/1.1 on its own socket per request, so that a request
 * can be sent whole, trickled, abandoned halfway, or left idle after its head, as the clients of
 * the soak mix and its abusers do.
 */
import { connect, type Socket } from 'node:net';

export function multipart(fields: Record<string, string>, image: Buffer | null): { body: Buffer; type: string } {
  const boundary = `----bgone-soak-${Math.random().toString(16).slice(2)}`;
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  if (image)
    parts.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image_file"; filename="p.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
      image,
      Buffer.from('\r\n'),
    );
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` };
}

/**
 * How the body goes out: whole; slow (16 pieces 100 ms apart); trickle (pieces of `bytes` every
 * `everyMs`); abort (half of it, then the socket closed); idle (the head only, declaring the body's
 * length, then nothing).
 */
export type SendMode = 'whole' | 'slow' | 'abort' | 'idle' | { trickle: { bytes: number; everyMs: number } };

export interface SendOptions {
  /** Closes the socket (the request then ends with status 0). */
  signal?: AbortSignal | undefined;
  /** Content-Length declared instead of the body's (idle uploads declare a big one). */
  declaredLength?: number | undefined;
}

/** One POST on its own socket; resolves to the status answered (0: closed without an answer, -1: no answer in 120 s). */
export function send(
  port: number,
  pathName: string,
  key: string | null,
  body: Buffer,
  type: string,
  mode: SendMode,
  options: SendOptions = {},
): Promise<number> {
  return new Promise((resolve) => {
    const socket: Socket = connect(port, '127.0.0.1');
    let answer = '';
    let done = false;
    const finish = (status: number) => {
      if (done) return;
      done = true;
      options.signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(status);
    };
    const onAbort = () => finish(0);
    if (options.signal?.aborted) return finish(0);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    socket.setTimeout(120_000, () => finish(-1));
    socket.on('data', (c) => {
      answer += c.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (m && answer.includes('\r\n\r\n')) {
        const length = /content-length: (\d+)/i.exec(answer);
        const headEnd = answer.indexOf('\r\n\r\n') + 4;
        if (!length || answer.length - headEnd >= Number(length[1])) finish(Number(m[1]));
      }
    });
    socket.on('error', () => finish(answer ? Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? -1) : 0));
    socket.on('close', () => finish(answer ? Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0) : 0));
    const head =
      `POST ${pathName} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${type}\r\nContent-Length: ${options.declaredLength ?? body.length}\r\nConnection: close\r\n` +
      `${key ? `Authorization: Bearer ${key}\r\n` : ''}\r\n`;
    socket.write(head);
    if (mode === 'idle') return;
    if (mode === 'whole') socket.write(body);
    else if (mode === 'abort') {
      socket.write(body.subarray(0, body.length >> 1), () => setTimeout(() => finish(0), 20));
    } else {
      // Slow: 16 pieces 100 ms apart (well inside any body deadline); trickle: as asked.
      const { bytes, everyMs } = mode === 'slow' ? { bytes: Math.ceil(body.length / 16), everyMs: 100 } : mode.trickle;
      let at = 0;
      const next = () => {
        if (done || at >= body.length) return;
        socket.write(body.subarray(at, at + bytes));
        at += bytes;
        setTimeout(next, everyMs);
      };
      next();
    }
  });
}
