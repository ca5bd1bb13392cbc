// The embedding example of docs/embedding.md, compiled with tsc against the installed package's
// types by `npm run test:embed` (scripts/embed-check.mjs) and run there on a real photo: a plain
// node:http handler that takes an uploaded image as the request body and answers the cut-out.
import { createServer } from 'node:http';
// ERROR_STATUS: the HTTP status bgone's own API answers each error code with.
import { BgoneError, ERROR_STATUS, type ErrorCode, type RemoveBackgroundOptions, removeBackground } from 'bgone';

const MAX_UPLOAD = 20 * 1024 * 1024; // bgone refuses larger files (image_too_large) anyway

const server = createServer(async (req, res) => {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_UPLOAD) return void res.writeHead(400).end(JSON.stringify({ error: { code: 'image_too_large' } }));
    chunks.push(chunk);
  }
  // Dropped while still queued if the client goes away: no inference for nobody.
  const gone = new AbortController();
  res.on('close', () => gone.abort());
  const options: RemoveBackgroundOptions = { format: 'png', size: 'hd' };
  try {
    const cutout = await removeBackground(Buffer.concat(chunks), options, { signal: gone.signal });
    res.writeHead(200, { 'content-type': 'image/png', 'x-width': cutout.width, 'x-height': cutout.height }).end(cutout.data);
  } catch (err) {
    if (gone.signal.aborted) return;
    const code: ErrorCode = err instanceof BgoneError ? err.code : 'internal_error';
    res.writeHead(ERROR_STATUS[code], { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code, message: (err as Error).message } }));
  }
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  if (address && typeof address === 'object') console.log(`listening on ${address.port}`);
});
