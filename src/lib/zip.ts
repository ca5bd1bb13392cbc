/**
 * A ZIP file of stored entries (no compression: JPEG and PNG are compressed already), as format=zip
 * answers it: each entry's local header and bytes, then the central directory and its end record.
 * The CRC-32 is computed here with a 256-entry table (zlib.crc32 is Node 22's). Every entry carries
 * the same fixed DOS date, so that the same images give the same bytes.
 */

export interface ZipEntry {
  name: string;
  data: Uint8Array;
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** The CRC-32 of `data` (the polynomial of ZIP, PNG and gzip). */
/**
 * The fields a local header and its central-directory record share, in the same order from `at`:
 * version needed, flags, method (stored), time, date, CRC-32, both sizes, the name's length.
 */
function writeEntryFields(header: Buffer, at: number, crc: number, size: number, nameLength: number): void {
  header.writeUInt16LE(VERSION, at);
  header.writeUInt16LE(FLAGS, at + 2);
  header.writeUInt16LE(0, at + 4); // stored
  header.writeUInt16LE(DOS_TIME, at + 6);
  header.writeUInt16LE(DOS_DATE, at + 8);
  header.writeUInt32LE(crc, at + 10);
  header.writeUInt32LE(size, at + 14);
  header.writeUInt32LE(size, at + 18);
  header.writeUInt16LE(nameLength, at + 22);
}

export function crc32(data: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < data.length; i++) c = CRC_TABLE[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** 1 January 2000, 00:00: the DOS date ((year - 1980) << 9 | month << 5 | day) and time (0). */
const DOS_DATE = (20 << 9) | (1 << 5) | 1;
const DOS_TIME = 0;
/** Version 2.0 needed to extract; bit 11 of the flags: the names are UTF-8. */
const VERSION = 20;
const FLAGS = 0x0800;
/** The largest size or offset a ZIP without the ZIP64 extension holds. */
const MAX_32 = 0xffffffff;

/** The ZIP file holding `entries`, in their order, stored. */
export function zipStored(entries: readonly ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const crc = crc32(entry.data);
    const size = entry.data.length;
    if (size > MAX_32 || offset > MAX_32) throw new RangeError('a ZIP without ZIP64 holds at most 4 GiB');
    const local = Buffer.alloc(30 + name.length);
    local.writeUInt32LE(0x04034b50, 0);
    writeEntryFields(local, 4, crc, size, name.length);
    local.writeUInt16LE(0, 28); // no extra field
    name.copy(local, 30);
    const central = Buffer.alloc(46 + name.length);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(VERSION, 4); // made by: MS-DOS, 2.0
    writeEntryFields(central, 6, crc, size, name.length);
    // extra field, comment, disk number, internal and external attributes: 0
    central.writeUInt32LE(offset, 42);
    name.copy(central, 46);
    locals.push(local, Buffer.from(entry.data.buffer, entry.data.byteOffset, entry.data.byteLength));
    centrals.push(central);
    offset += local.length + size;
  }
  const directorySize = centrals.reduce((sum, c) => sum + c.length, 0);
  if (offset > MAX_32) throw new RangeError('a ZIP without ZIP64 holds at most 4 GiB');
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  // this disk and the directory's disk: 0
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directorySize, 12);
  end.writeUInt32LE(offset, 16);
  // no comment
  return Buffer.concat([...locals, ...centrals, end]);
}
