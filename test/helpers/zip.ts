/**
 * A reader of stored ZIP files, independent of src/lib/zip.ts: the end record, the central
 * directory, and each entry's local header and bytes, every field checked against its twin. The
 * CRC-32 of each entry is checked against the one in a gzip trailer of its bytes (node:zlib).
 */
import { gzipSync } from 'node:zlib';
import { expect } from 'vitest';

export interface UnzippedEntry {
  name: string;
  data: Buffer;
  crc: number;
}

/** The CRC-32 zlib computes for `data`: the first word of its gzip trailer. */
export function zlibCrc32(data: Uint8Array): number {
  const gz = gzipSync(data, { level: 0 });
  return gz.readUInt32LE(gz.length - 8);
}

/** The entries of a ZIP file of stored entries, in the central directory's order; fails the test on any inconsistency. */
export function unzipStored(zip: Buffer): UnzippedEntry[] {
  expect(zip.length).toBeGreaterThanOrEqual(22);
  const end = zip.length - 22; // no archive comment
  expect(zip.readUInt32LE(end)).toBe(0x06054b50);
  expect(zip.readUInt16LE(end + 4)).toBe(0); // this disk
  expect(zip.readUInt16LE(end + 6)).toBe(0); // the directory's disk
  const count = zip.readUInt16LE(end + 10);
  expect(zip.readUInt16LE(end + 8)).toBe(count);
  const dirSize = zip.readUInt32LE(end + 12);
  const dirOffset = zip.readUInt32LE(end + 16);
  expect(zip.readUInt16LE(end + 20)).toBe(0);
  expect(dirOffset + dirSize).toBe(end);
  const entries: UnzippedEntry[] = [];
  let at = dirOffset;
  let expectedLocal = 0;
  for (let i = 0; i < count; i++) {
    expect(zip.readUInt32LE(at)).toBe(0x02014b50);
    const method = zip.readUInt16LE(at + 10);
    const crc = zip.readUInt32LE(at + 16);
    const compressed = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLength = zip.readUInt16LE(at + 28);
    const extra = zip.readUInt16LE(at + 30);
    const comment = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.toString('utf8', at + 46, at + 46 + nameLength);
    expect(method).toBe(0);
    expect(compressed).toBe(size);
    expect(local).toBe(expectedLocal); // entries back to back, in the directory's order
    // The local header repeats the directory's fields.
    expect(zip.readUInt32LE(local)).toBe(0x04034b50);
    expect(zip.readUInt16LE(local + 8)).toBe(method);
    expect(zip.readUInt16LE(local + 10)).toBe(zip.readUInt16LE(at + 12)); // time
    expect(zip.readUInt16LE(local + 12)).toBe(zip.readUInt16LE(at + 14)); // date
    expect(zip.readUInt32LE(local + 14)).toBe(crc);
    expect(zip.readUInt32LE(local + 18)).toBe(compressed);
    expect(zip.readUInt32LE(local + 22)).toBe(size);
    const localName = zip.readUInt16LE(local + 26);
    const localExtra = zip.readUInt16LE(local + 28);
    expect(zip.toString('utf8', local + 30, local + 30 + localName)).toBe(name);
    const start = local + 30 + localName + localExtra;
    const data = zip.subarray(start, start + size);
    expect(data.length).toBe(size);
    expect(zlibCrc32(data)).toBe(crc);
    entries.push({ name, data, crc });
    expectedLocal = start + size;
    at += 46 + nameLength + extra + comment;
  }
  expect(expectedLocal).toBe(dirOffset);
  expect(at).toBe(end);
  return entries;
}
