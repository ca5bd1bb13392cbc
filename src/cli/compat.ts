/**
 * `bgone compat check URL KEY`: the smoke test an operator runs against their own bgone before
 * pointing remove.bg's clients at it. It makes the calls those clients make by default (their
 * fields, encodings, headers and answers: docs/migrating-from-remove-bg.md), prints each call and
 * what came back, and exits 1 if any answer is not what the client expects. It charges the key's
 * account one credit for each image call (8 at most).
 */

import { readFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';
import { crc32 } from '../lib/header-size.js';
import { type ParsedArgs, stringFlag, UsageError } from './args.js';

interface Call {
  /** What the call is, and which clients make it. */
  what: string;
  method: 'GET' | 'POST' | 'OPTIONS';
  path: string;
  headers: Record<string, string>;
  body?: FormData | string;
  /** What the client needs of the answer: null when it has it, else why not. */
  expect(res: Response, body: Buffer): string | null;
  /** A short account of the answer. */
  show?(res: Response, body: Buffer): string;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** A photo-like test image (a shaded ball on a pale backdrop), 320x240 RGB PNG: nothing to download, nothing shipped. */
export function testImage(): Buffer {
  const w = 320;
  const h = 240;
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    raw[y * (w * 3 + 1)] = 0; // filter: none
    for (let x = 0; x < w; x++) {
      const dx = (x - 160) / 70;
      const dy = (y - 125) / 70;
      const r2 = dx * dx + dy * dy;
      const at = y * (w * 3 + 1) + 1 + x * 3;
      if (r2 <= 1) {
        const light = Math.max(0.25, 1 - 0.6 * Math.hypot(dx + 0.35, dy + 0.35));
        raw[at] = Math.round(230 * light);
        raw[at + 1] = Math.round(70 * light);
        raw[at + 2] = Math.round(40 * light);
      } else {
        const shade = 225 - Math.round(20 * (y / h));
        raw[at] = shade;
        raw[at + 1] = shade;
        raw[at + 2] = shade - 5;
      }
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const type = (res: Response) => res.headers.get('content-type') ?? '';
/** What the checks read of remove.bg's JSON answers. */
interface RemoveBgJson {
  errors?: Array<{ title?: unknown; code?: unknown }>;
  data?: { result_b64?: unknown; attributes?: { credits?: Record<string, unknown> } };
}
const json = (body: Buffer): RemoveBgJson | undefined => {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
};

/** The names of a stored ZIP's entries, from its central directory. */
function zipNames(zip: Buffer): string[] {
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0) return [];
  const names: string[] = [];
  let at = zip.readUInt32LE(end + 16);
  for (let i = 0; i < zip.readUInt16LE(end + 10) && at + 46 <= zip.length; i++) {
    const nameLength = zip.readUInt16LE(at + 28);
    names.push(zip.toString('latin1', at + 46, at + 46 + nameLength));
    at += 46 + nameLength + zip.readUInt16LE(at + 30) + zip.readUInt16LE(at + 32);
  }
  return names;
}

/** A 200 image of this type, with remove.bg's headers and an integer X-Credits-Charged. */
const image =
  (media: string) =>
  (res: Response, body: Buffer): string | null => {
    if (res.status !== 200) return `status ${res.status}: ${json(body)?.errors?.[0]?.title ?? body.subarray(0, 120).toString()}`;
    if (!type(res).startsWith(media)) return `Content-Type ${type(res)}, wanted ${media}`;
    if (!/^\d+$/.test(res.headers.get('x-credits-charged') ?? '')) return 'no integer X-Credits-Charged';
    if (!res.headers.get('x-width')) return 'no X-Width';
    if (media === 'application/zip' && zipNames(body).join(',') !== 'color.jpg,alpha.png') return `ZIP holds ${zipNames(body).join(', ')}`;
    return null;
  };

/** remove.bg's error answer: this status and code, a string title. */
const error =
  (status: number, code: string) =>
  (res: Response, body: Buffer): string | null => {
    const first = json(body)?.errors?.[0];
    if (res.status !== status) return `status ${res.status}, wanted ${status}`;
    if (!type(res).startsWith('application/json') || typeof first?.title !== 'string') return "not remove.bg's error body";
    return first.code === code ? null : `code ${first.code}, wanted ${code}`;
  };

const imageShow = (res: Response, body: Buffer) => `${type(res)} ${res.headers.get('x-width')}x${res.headers.get('x-height')}, ${body.length} bytes`;

function calls(key: string, photo: Buffer): Call[] {
  const file = () => new Blob([new Uint8Array(photo)], { type: 'image/png' });
  const form = (fields: Record<string, string>) => {
    const f = new FormData();
    f.append('image_file', file(), 'photo.png');
    for (const [name, value] of Object.entries(fields)) f.append(name, value);
    return f;
  };
  const b64 = photo.toString('base64');
  return [
    {
      what: 'the balance (Ruby gem, remove-bg-api at construction)',
      method: 'GET',
      path: '/v1.0/account',
      headers: { 'X-Api-Key': key },
      expect: (res, body) => {
        const credits = json(body)?.data?.attributes?.credits;
        if (res.status !== 200) return `status ${res.status}`;
        const keys = Object.keys(credits ?? {})
          .sort()
          .join(',');
        return keys === 'enterprise,payg,subscription,total' ? null : `credits has ${keys}`;
      },
      show: (_, body) => `credits.total=${json(body)?.data?.attributes?.credits?.total}`,
    },
    {
      what: 'a file, size=auto (curl, Go CLI, Figma)',
      method: 'POST',
      path: '/v1.0/removebg',
      headers: { 'X-Api-Key': key },
      body: form({ size: 'auto' }),
      expect: image('image/png'),
      show: imageShow,
    },
    {
      what: 'format=zip (Ruby gem and official CLIs for a PNG)',
      method: 'POST',
      path: '/v1.0/removebg',
      headers: { 'X-Api-Key': key },
      body: form({ size: 'auto', format: 'zip' }),
      expect: image('application/zip'),
      show: imageShow,
    },
    {
      what: "format=zip with channels=alpha (the CLIs' --channels alpha)",
      method: 'POST',
      path: '/v1.0/removebg',
      headers: { 'X-Api-Key': key },
      body: form({ size: 'auto', format: 'zip', channels: 'alpha' }),
      expect: image('application/zip'),
      show: imageShow,
    },
    {
      what: 'every field empty but size, type, format, channels (remove-bg-cli)',
      method: 'POST',
      path: '/v1.0/removebg',
      headers: { 'X-Api-Key': key },
      body: form({
        size: 'auto',
        type: 'auto',
        type_level: '',
        format: 'png',
        roi: '',
        crop: '',
        crop_margin: '',
        scale: '',
        position: '',
        channels: 'rgba',
        add_shadow: '',
        semitransparency: '',
        bg_color: '',
      }),
      expect: image('image/png'),
      show: imageShow,
    },
    {
      what: 'JSON image_file_b64, Accept: application/json (npm remove.bg)',
      method: 'POST',
      path: '/v1.0/removebg',
      headers: { 'X-Api-Key': key, 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ size: 'preview', type: 'auto', crop: false, image_file_b64: b64 }),
      expect: (res, body) => (res.status === 200 && typeof json(body)?.data?.result_b64 === 'string' ? null : `status ${res.status}, no data.result_b64`),
      show: (res) => `${type(res)}, data.result_b64`,
    },
    {
      what: 'urlencoded image_file_b64 with roi "0 0 100% 100%" (Python clients)',
      method: 'POST',
      path: '/v1.0/removebg',
      headers: { 'X-Api-Key': key, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ image_file_b64: b64, size: 'regular', roi: '0 0 100% 100%', crop: 'True' }).toString(),
      expect: image('image/'),
      show: imageShow,
    },
    {
      what: 'Authorization: Bearer (remove.bg OAuth header)',
      method: 'POST',
      path: '/v1.0/removebg',
      headers: { Authorization: `Bearer ${key}` },
      body: form({ size: 'preview' }),
      expect: image('image/png'),
      show: imageShow,
    },
    {
      what: 'a wrong key: 403 auth_failed',
      method: 'GET',
      path: '/v1.0/account',
      headers: { 'X-Api-Key': 'rb-sk_compat-check-wrong-key' },
      expect: error(403, 'auth_failed'),
      show: (_, body) => `"${json(body)?.errors?.[0]?.title}"`,
    },
    {
      what: 'a bad value: 400 invalid_size',
      method: 'POST',
      path: '/v1.0/removebg',
      headers: { 'X-Api-Key': key },
      body: form({ size: 'huge' }),
      expect: error(400, 'invalid_size'),
      show: (_, body) => `"${json(body)?.errors?.[0]?.title}", not charged`,
    },
    {
      what: "a browser's preflight (CORS)",
      method: 'OPTIONS',
      path: '/v1.0/removebg',
      headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'x-api-key' },
      expect: (res) =>
        res.status === 204 && res.headers.get('access-control-allow-origin')
          ? null
          : `status ${res.status}, Access-Control-Allow-Origin ${res.headers.get('access-control-allow-origin') ?? 'absent'} (BGONE_CORS_ORIGINS)`,
      show: (res) => `Access-Control-Allow-Origin: ${res.headers.get('access-control-allow-origin')}`,
    },
  ];
}

/** Runs the calls against `base`; resolves with the exit code. */
export async function compatCheck(base: string, key: string, photo: Buffer, print: (line: string) => void = console.log): Promise<number> {
  const root = base.replace(/\/+$/, '').replace(/\/v1\.0$/, '');
  print(`bgone compat check: ${root} (remove.bg's API under /v1.0, called as its clients call it)`);
  let failed = 0;
  const list = calls(key, photo);
  for (const call of list) {
    const label = `${call.method.padEnd(7)} ${call.path.padEnd(16)} ${call.what}`;
    let verdict: string | null;
    let shown = '';
    try {
      const res = await fetch(`${root}${call.path}`, { method: call.method, headers: call.headers, body: call.body, signal: AbortSignal.timeout(120_000) });
      const body = Buffer.from(await res.arrayBuffer());
      verdict = call.expect(res, body);
      shown = `${res.status} ${call.show ? call.show(res, body) : ''}`.trim();
    } catch (err) {
      verdict = `no answer: ${(err as Error).message}`;
    }
    if (verdict) failed++;
    print(`  ${verdict ? 'FAIL' : 'ok  '}  ${label}\n        → ${verdict ?? shown}`);
  }
  print(`${list.length - failed} of ${list.length} calls answered as remove.bg's clients expect.`);
  return failed === 0 ? 0 : 1;
}

/** `bgone compat check URL KEY [--image FILE]`. */
export async function compatCommand(args: ParsedArgs): Promise<number> {
  const [url, key] = args.positionals;
  if (!url || !key) throw new UsageError('compat check needs the service URL and an API key: bgone compat check http://host:8080 rb-sk_...');
  if (!/^https?:\/\//.test(url)) throw new UsageError(`compat check: ${url} is not an http:// or https:// URL`);
  const imagePath = stringFlag(args, 'image');
  const photo = imagePath === undefined ? testImage() : readFileSync(imagePath);
  return compatCheck(url, key, photo);
}
