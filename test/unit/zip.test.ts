/** The ZIP writer of format=zip (src/lib/zip.ts): its CRC-32 and a file a reader accepts. */
import { describe, expect, it } from 'vitest';
import { crc32, zipStored } from '../../src/lib/zip.js';
import { unzipStored, zlibCrc32 } from '../helpers/zip.js';

describe('crc32', () => {
  it('gives the check value of CRC-32 and zlib’s value for other bytes', () => {
    expect(crc32(Buffer.from('123456789'))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array(0))).toBe(0);
    const bytes = Buffer.alloc(70_000);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919) % 251;
    expect(crc32(bytes)).toBe(zlibCrc32(bytes));
  });
});

describe('zipStored', () => {
  it('writes the entries stored, in order, with their names, bytes and CRCs', () => {
    const color = Buffer.from([0xff, 0xd8, 0xff, 1, 2, 3]);
    const alpha = Buffer.alloc(1000, 0x55);
    const zip = zipStored([
      { name: 'color.jpg', data: color },
      { name: 'alpha.png', data: alpha },
    ]);
    const entries = unzipStored(zip);
    expect(entries.map((e) => e.name)).toEqual(['color.jpg', 'alpha.png']);
    expect(entries[0]!.data.equals(color)).toBe(true);
    expect(entries[1]!.data.equals(alpha)).toBe(true);
    expect(entries[1]!.crc).toBe(crc32(alpha));
  });

  it('gives the same bytes for the same entries (a fixed date), and reads a Uint8Array view in place', () => {
    const backing = new Uint8Array([9, 9, 1, 2, 3, 9]);
    const view = backing.subarray(2, 5);
    const a = zipStored([{ name: 'x', data: view }]);
    const b = zipStored([{ name: 'x', data: Buffer.from([1, 2, 3]) }]);
    expect(a.equals(b)).toBe(true);
    expect(unzipStored(a)[0]!.data).toEqual(Buffer.from([1, 2, 3]));
  });

  it('an empty archive is its end record alone', () => {
    expect(unzipStored(zipStored([]))).toEqual([]);
  });
});
