/**
 * The check of an image's data past its header, without the native core: for a background image,
 * which the native core decodes only after the model has run (the canvas it covers is known only
 * then), so that data that cannot be decoded are refused before the model runs. What is refused is
 * only what the native core's decode refuses too; anything this check cannot tell is left to it.
 *
 * - JPEG: the scans walked, Huffman codes and all, as native/jpeg_scan.cc walks them before libjpeg
 *   decodes (the same verdicts): scan data that end before the last block, an invalid code, a
 *   progressive image that ends before every coefficient is complete.
 * - PNG: the chunks up to the image data, IHDR, PLTE and IDAT with their CRC-32 (libspng refuses a
 *   critical chunk that fails it), and the IDAT stream inflated (in zlib's thread pool, a chunk at a
 *   time, nothing kept) up to the bytes the header's size needs: a stream that is corrupt or ends
 *   before the last row is refused.
 * - WebP: the chunks up to the bitstream (VP8 or VP8L): a chunk that the file ends inside is refused.
 *
 * A refusal is a BgoneError invalid_image without a field (the caller names it). The JPEG walk runs
 * on the calling thread (about 35 MB of JPEG a second on one core), the PNG inflate off it.
 */
import * as zlib from 'node:zlib';
import { BgoneError } from './errors.js';
import { crc32 as crc32InTypeScript, sniffFormat } from './header-size.js';

/** node:zlib's CRC-32 (Node 20.15 on), else header-size.ts's: the IDAT chunks may hold 20 MB. */
const crc32: (b: Uint8Array) => number = (zlib as { crc32?: (b: Uint8Array) => number }).crc32 ?? crc32InTypeScript;

/** Refuses (BgoneError invalid_image) data the native decode cannot read; resolves otherwise. */
export async function checkImageData(bytes: Uint8Array, signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  const format = sniffFormat(bytes);
  if (format === 'jpg') checkJpegScans(bytes);
  else if (format === 'webp') checkWebpChunks(bytes);
  else await checkPngData(bytes, signal);
}

function broken(detail: string): never {
  throw new BgoneError('invalid_image', undefined, undefined, detail);
}

// --- JPEG: native/jpeg_scan.cc, step by step --------------------------------------------------

/** A form the walker does not follow, or one libjpeg refuses by itself: no verdict here. */
class NotOurs extends Error {}

const FAST_BITS = 9;

interface Huffman {
  defined: boolean;
  maxSymbol: number;
  /** Codes of up to FAST_BITS bits by the next FAST_BITS bits: (length << 8) | symbol, 0 for a longer code. */
  fast: Uint16Array;
  /** Per length: the largest code of that length, -1 if none; [17] above every code. */
  maxCode: Int32Array;
  /** Per length: the index in `symbols` of a code, minus the code. */
  offset: Int32Array;
  symbols: Uint8Array;
}

function emptyTable(): Huffman {
  return {
    defined: false,
    maxSymbol: 0,
    fast: new Uint16Array(1 << FAST_BITS),
    maxCode: new Int32Array(18),
    offset: new Int32Array(17),
    symbols: new Uint8Array(256),
  };
}

function build(table: Huffman, counts: ArrayLike<number>, symbols: ArrayLike<number>, total: number): void {
  table.fast.fill(0);
  let max = 0;
  for (let i = 0; i < total; i++) {
    table.symbols[i] = symbols[i]!;
    max = Math.max(max, symbols[i]!);
  }
  table.maxSymbol = max;
  let code = 0;
  let n = 0;
  for (let len = 1; len <= 16; len++) {
    table.offset[len] = n - code;
    for (let i = 0; i < counts[len - 1]!; i++, n++, code++) {
      if (len <= FAST_BITS) {
        const from = code << (FAST_BITS - len);
        table.fast.fill((len << 8) | symbols[n]!, from, from + (1 << (FAST_BITS - len)));
      }
    }
    table.maxCode[len] = counts[len - 1] === 0 ? -1 : code - 1;
    if (code >= 1 << len) throw new NotOurs(); // codes that do not fit (or all ones): libjpeg refuses the table
    code <<= 1;
  }
  table.maxCode[17] = 0x7fffffff;
  table.defined = true;
}

// The tables of the JPEG standard (ITU T.81, K.3), which libjpeg takes for tables 0 and 1 where a
// file defines none: counts per code length, then symbols.
const STD_DC_COUNTS = [
  [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
  [0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
];
const STD_DC_SYMBOLS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
const STD_AC_COUNTS = [
  [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125],
  [0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119],
];
const STD_AC_SYMBOLS = [
  [
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07, 0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42,
    0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0, 0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x34, 0x35,
    0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67,
    0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98,
    0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
    0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4,
    0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
  ],
  [
    0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71, 0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1,
    0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0, 0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26, 0x27, 0x28, 0x29, 0x2a,
    0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66,
    0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96,
    0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4,
    0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
  ],
];

/** The low n bits, n from 0 to 16. */
const MASKS = Array.from({ length: 17 }, (_, n) => (1 << n) - 1);

/**
 * The entropy-coded bytes of a scan: stuffed 0xFF 0x00 read as 0xFF; a marker ends the data, and
 * past it (or past the file) come zero bits, as libjpeg fills them. Up to 32 bits are held, the
 * newest lowest.
 */
class Bits {
  private acc = 0;
  private bits = 0;
  private atMarker = false;

  constructor(
    private readonly data: Uint8Array,
    private p: number,
  ) {}

  /** The next n bits (at most 16), zero bits past the data. */
  private peek(n: number): number {
    const held = this.bits;
    return held >= n ? (this.acc >>> (held - n)) & MASKS[n]! : (this.acc << (n - held)) & MASKS[n]!;
  }

  /** Decodes one Huffman symbol, then skips the `symbol & valueMask` bits that follow it; -1 when the data end first. */
  symbol(table: Huffman, valueMask = 0): number {
    if (this.bits < 16) this.fill();
    const entry = table.fast[this.peek(FAST_BITS)]!;
    let len = entry >> 8;
    let out: number;
    if (len !== 0) {
      out = entry & 0xff;
    } else {
      len = FAST_BITS + 1;
      while (len <= 16 && this.peek(len) > table.maxCode[len]!) len++;
      if (len > 16) broken('JPEG scan data hold an invalid Huffman code');
      out = table.symbols[table.offset[len]! + this.peek(len)]!;
    }
    if (len > this.bits) return -1;
    this.bits -= len;
    return this.skip(out & valueMask) ? out : -1;
  }

  /** Reads n bits (0 to 16); -1 when the data end first. */
  take(n: number): number {
    if (this.bits < n) {
      this.fill();
      if (this.bits < n) return -1;
    }
    const value = n === 0 ? 0 : this.peek(n);
    this.bits -= n;
    return value;
  }

  /** Skips n bits (any number); false when the data end first. */
  skip(n: number): boolean {
    for (; n > 16; n -= 16) if (this.take(16) < 0) return false;
    return this.take(n) >= 0;
  }

  /**
   * Ends a restart interval or the scan: drops the bits left and the bytes no block used, and reads
   * the marker that follows. Returns it, or -1 where the file ends first; the position is then
   * after the marker.
   */
  nextMarker(): number {
    this.acc = 0;
    this.bits = 0;
    this.atMarker = false;
    const { data } = this;
    const end = data.length;
    while (this.p < end) {
      if (data[this.p] !== 0xff) {
        this.p++;
        continue;
      }
      let q = this.p + 1;
      while (q < end && data[q] === 0xff) q++;
      if (q >= end) break;
      this.p = q + 1;
      if (data[q] !== 0x00) return data[q]!;
    }
    this.p = end;
    return -1;
  }

  get position(): number {
    return this.p;
  }

  private fill(): void {
    const { data } = this;
    const end = data.length;
    while (this.bits <= 24 && !this.atMarker) {
      if (this.p >= end) {
        this.atMarker = true;
        break;
      }
      const b = data[this.p]!;
      if (b === 0xff) {
        let q = this.p + 1;
        while (q < end && data[q] === 0xff) q++;
        if (q >= end || data[q] !== 0x00) {
          this.atMarker = true; // stays on the marker's first 0xFF
          break;
        }
        this.p = q + 1;
      } else {
        this.p++;
      }
      this.acc = ((this.acc << 8) | b) >>> 0;
      this.bits += 8;
    }
  }
}

interface Component {
  id: number;
  h: number;
  v: number;
  blocksW: number;
  blocksH: number;
  /** Blocks per row with the MCU padding of interleaved scans. */
  stride: number;
  /** Per block: the AC coefficients nonzero so far (progressive refinement), bits 0-31 and 32-63. */
  nonzeroLow: Uint32Array;
  nonzeroHigh: Uint32Array;
  /** Per coefficient: the lowest bit coded so far, -1: none. */
  lowestBit: Int8Array;
}

interface Scan {
  components: Component[];
  dc: Huffman[];
  ac: Huffman[];
  ss: number;
  se: number;
  ah: number;
  al: number;
}

function isNonzero(c: Component, index: number, k: number): boolean {
  return k < 32 ? ((c.nonzeroLow[index]! >>> k) & 1) === 1 : ((c.nonzeroHigh[index]! >>> (k - 32)) & 1) === 1;
}

function setNonzero(c: Component, index: number, k: number): void {
  if (k < 32) c.nonzeroLow[index] = (c.nonzeroLow[index]! | (1 << k)) >>> 0;
  else if (k < 64) c.nonzeroHigh[index] = (c.nonzeroHigh[index]! | (1 << (k - 32))) >>> 0;
}

class JpegWalker {
  private progressive = false;
  private width = 0;
  private height = 0;
  private mcusW = 0;
  private mcusH = 0;
  private components: Component[] = [];
  private readonly dcTables: Huffman[] = [emptyTable(), emptyTable(), emptyTable(), emptyTable()];
  private readonly acTables: Huffman[] = [emptyTable(), emptyTable(), emptyTable(), emptyTable()];
  private restartInterval = 0;
  private eobRun = 0;

  constructor(private readonly data: Uint8Array) {
    for (let i = 0; i < 2; i++) {
      build(this.dcTables[i]!, STD_DC_COUNTS[i]!, STD_DC_SYMBOLS, 12);
      build(this.acTables[i]!, STD_AC_COUNTS[i]!, STD_AC_SYMBOLS[i]!, 162);
    }
  }

  run(): void {
    const { data } = this;
    const end = data.length;
    let p = 2;
    for (;;) {
      let marker = -1;
      while (p < end && marker < 0) {
        if (data[p++] !== 0xff) continue; // bytes outside a segment: libjpeg skips them with a warning
        while (p < end && data[p] === 0xff) p++;
        if (p < end && data[p] !== 0x00) marker = data[p]!;
        if (p < end) p++;
      }
      if (marker < 0) return; // no end marker: libvips refuses a file cut short by itself
      if (marker === 0xd9) break;
      if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) continue;
      if (end - p < 2) return;
      const length = (data[p]! << 8) | data[p + 1]!;
      if (length < 2 || end - p < length) return;
      const segment = p + 2;
      const size = length - 2;
      p += length;
      if (marker === 0xc0 || marker === 0xc1 || marker === 0xc2) {
        this.frameHeader(segment, size, marker === 0xc2);
      } else if (marker >= 0xc3 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        return; // lossless, hierarchical or arithmetic coding: not followed here
      } else if (marker === 0xc4) {
        this.huffmanTables(segment, size);
      } else if (marker === 0xdd) {
        if (size < 2) return;
        this.restartInterval = (data[segment]! << 8) | data[segment + 1]!;
      } else if (marker === 0xda) {
        if (this.components.length === 0) return;
        p = this.scan(segment, size, p);
      }
    }
    // Every coefficient of every component coded down to its last bit: a progressive image cut
    // between two scans (and closed with an end marker) lacks some.
    for (const c of this.components) {
      for (let k = 0; k < 64; k++) if (c.lowestBit[k] !== 0) broken('JPEG image ends before its scans have coded every coefficient');
    }
  }

  private frameHeader(s: number, size: number, progressive: boolean): void {
    const { data } = this;
    if (this.components.length > 0 || size < 6) throw new NotOurs();
    this.progressive = progressive;
    this.height = (data[s + 1]! << 8) | data[s + 2]!;
    this.width = (data[s + 3]! << 8) | data[s + 4]!;
    const count = data[s + 5]!;
    if (this.width === 0 || this.height === 0 || count < 1 || count > 4 || size < 6 + 3 * count) throw new NotOurs();
    let hMax = 1;
    let vMax = 1;
    const components: Component[] = [];
    for (let i = 0; i < count; i++) {
      const h = data[s + 7 + 3 * i]! >> 4;
      const v = data[s + 7 + 3 * i]! & 15;
      if (h < 1 || h > 4 || v < 1 || v > 4) throw new NotOurs();
      hMax = Math.max(hMax, h);
      vMax = Math.max(vMax, v);
      components.push({
        id: data[s + 6 + 3 * i]!,
        h,
        v,
        blocksW: 0,
        blocksH: 0,
        stride: 0,
        nonzeroLow: new Uint32Array(0),
        nonzeroHigh: new Uint32Array(0),
        lowestBit: new Int8Array(64).fill(-1),
      });
    }
    this.mcusW = Math.floor((this.width + 8 * hMax - 1) / (8 * hMax));
    this.mcusH = Math.floor((this.height + 8 * vMax - 1) / (8 * vMax));
    for (const c of components) {
      const samplesW = Math.floor((this.width * c.h + hMax - 1) / hMax);
      const samplesH = Math.floor((this.height * c.v + vMax - 1) / vMax);
      c.blocksW = Math.floor((samplesW + 7) / 8);
      c.blocksH = Math.floor((samplesH + 7) / 8);
      c.stride = this.mcusW * c.h;
    }
    this.components = components;
  }

  private huffmanTables(s: number, size: number): void {
    const { data } = this;
    while (size > 0) {
      if (size < 17) throw new NotOurs();
      const cls = data[s]! >> 4;
      const id = data[s]! & 15;
      if (cls > 1 || id > 3) throw new NotOurs();
      let total = 0;
      for (let i = 1; i <= 16; i++) total += data[s + i]!;
      if (total > 256 || size < 17 + total) throw new NotOurs();
      build((cls === 0 ? this.dcTables : this.acTables)[id]!, data.subarray(s + 1, s + 17), data.subarray(s + 17, s + 17 + total), total);
      s += 17 + total;
      size -= 17 + total;
    }
  }

  /** Walks one scan's data, from `from`; returns where the walk of the markers goes on. */
  private scan(s: number, size: number, from: number): number {
    const { data } = this;
    if (size < 1) throw new NotOurs();
    const count = data[s]!;
    if (count < 1 || count > 4 || size < 4 + 2 * count) throw new NotOurs();
    const sc: Scan = { components: [], dc: [], ac: [], ss: 0, se: 63, ah: 0, al: 0 };
    for (let i = 0; i < count; i++) {
      const id = data[s + 1 + 2 * i]!;
      const found = this.components.find((c) => c.id === id);
      if (!found) throw new NotOurs();
      sc.components.push(found);
      sc.dc.push(this.dcTables[(data[s + 2 + 2 * i]! >> 4) & 3]!);
      sc.ac.push(this.acTables[data[s + 2 + 2 * i]! & 3]!);
    }
    const params = s + 1 + 2 * count;
    if (this.progressive) {
      sc.ss = data[params]!;
      sc.se = data[params + 1]!;
      sc.ah = data[params + 2]! >> 4;
      sc.al = data[params + 2]! & 15;
      // What libjpeg refuses (JERR_BAD_PROGRESSION).
      const dcBand = sc.ss === 0;
      if (dcBand ? sc.se !== 0 : sc.ss > sc.se || sc.se > 63 || count !== 1) throw new NotOurs();
      if ((sc.ah !== 0 && sc.al !== sc.ah - 1) || sc.al > 13) throw new NotOurs();
    }
    // The tables this scan decodes with must be defined (libjpeg refuses the scan otherwise).
    for (let i = 0; i < count; i++) {
      const needsDc = !this.progressive || (sc.ss === 0 && sc.ah === 0);
      const needsAc = !this.progressive || sc.ss > 0;
      if (needsDc && (!sc.dc[i]!.defined || sc.dc[i]!.maxSymbol > 15)) throw new NotOurs();
      if (needsAc && !sc.ac[i]!.defined) throw new NotOurs();
    }
    if (this.progressive && sc.ss > 0 && sc.components[0]!.nonzeroLow.length === 0) {
      const c = sc.components[0]!;
      const blocks = c.stride * this.mcusH * c.v;
      c.nonzeroLow = new Uint32Array(blocks);
      c.nonzeroHigh = new Uint32Array(blocks);
    }

    const bits = new Bits(data, from);
    const interleaved = count > 1;
    const first = sc.components[0]!;
    const mcus = interleaved ? this.mcusW * this.mcusH : first.blocksW * first.blocksH;
    this.eobRun = 0;
    for (let m = 0; m < mcus; m++) {
      if (this.restartInterval > 0 && m > 0 && m % this.restartInterval === 0) {
        const marker = bits.nextMarker();
        if (marker < 0xd0 || marker > 0xd7) broken('JPEG scan data end before its last block');
        this.eobRun = 0;
      }
      if (!interleaved) {
        const bx = m % first.blocksW;
        const by = Math.floor(m / first.blocksW);
        this.block(bits, sc, 0, first, by * first.stride + bx);
        continue;
      }
      for (let i = 0; i < count; i++) {
        const c = sc.components[i]!;
        for (let n = 0; n < c.h * c.v; n++) this.block(bits, sc, i, c, 0);
      }
    }
    for (const c of sc.components) {
      const from = this.progressive ? sc.ss : 0;
      const to = this.progressive ? sc.se : 63;
      for (let k = from; k <= to; k++) c.lowestBit[k] = this.progressive ? sc.al : 0;
    }
    // Back to the marker that ends the scan, for the walk of the markers.
    const marker = bits.nextMarker();
    return marker < 0 ? data.length : bits.position - 2;
  }

  private block(bits: Bits, sc: Scan, i: number, c: Component, index: number): void {
    const ok = !this.progressive
      ? sequential(bits, sc.dc[i]!, sc.ac[i]!)
      : sc.ss === 0
        ? sc.ah === 0
          ? bits.symbol(sc.dc[i]!, 15) >= 0
          : bits.skip(1)
        : sc.ah === 0
          ? this.acFirst(bits, sc, sc.ac[i]!, c, index)
          : this.acRefine(bits, sc, sc.ac[i]!, c, index);
    if (!ok) broken('JPEG scan data end before its last block');
  }

  private acFirst(bits: Bits, sc: Scan, ac: Huffman, c: Component, index: number): boolean {
    if (this.eobRun > 0) {
      this.eobRun--;
      return true;
    }
    for (let k = sc.ss; k <= sc.se; ) {
      const rs = bits.symbol(ac, 15);
      if (rs < 0) return false;
      const r = rs >> 4;
      const s = rs & 15;
      if (s !== 0) {
        k += r;
        if (k < 64) setNonzero(c, index, k);
        k++;
      } else if (r === 15) {
        k += 16;
      } else {
        const extra = bits.take(r);
        if (extra < 0) return false;
        this.eobRun = (1 << r) + extra - 1;
        break;
      }
    }
    return true;
  }

  private acRefine(bits: Bits, sc: Scan, ac: Huffman, c: Component, index: number): boolean {
    let k = sc.ss;
    if (this.eobRun === 0) {
      for (; k <= sc.se; k++) {
        const rs = bits.symbol(ac);
        if (rs < 0) return false;
        let r = rs >> 4;
        const s = rs & 15;
        let pending = s !== 0 ? 1 : 0; // the new coefficient's sign (its size is always 1)
        if (s === 0 && r !== 15) {
          const extra = bits.take(r);
          if (extra < 0) return false;
          this.eobRun = (1 << r) + extra;
          break;
        }
        // Past the coefficients already nonzero (a correction bit each) and r still zero.
        for (; k <= sc.se; k++) {
          if (isNonzero(c, index, k)) pending++;
          else if (--r < 0) break;
        }
        if (!bits.skip(pending)) return false;
        if (s !== 0 && k <= sc.se) setNonzero(c, index, k);
      }
    }
    if (this.eobRun > 0) {
      // A correction bit for each coefficient already nonzero from k to the band's end.
      let corrections = 0;
      for (let j = k; j <= sc.se; j++) if (isNonzero(c, index, j)) corrections++;
      if (corrections > 0 && !bits.skip(corrections)) return false;
      this.eobRun--;
    }
    return true;
  }
}

function sequential(bits: Bits, dc: Huffman, ac: Huffman): boolean {
  if (bits.symbol(dc, 15) < 0) return false;
  for (let k = 1; k < 64; ) {
    const rs = bits.symbol(ac, 15);
    if (rs < 0) return false;
    const r = rs >> 4;
    const s = rs & 15;
    if (s !== 0) k += r + 1;
    else if (r === 15) k += 16;
    else break;
  }
  return true;
}

/** native/jpeg_scan.cc check_jpeg_scans: throws invalid_image where it does. */
export function checkJpegScans(data: Uint8Array): void {
  if (data.length < 4) return;
  try {
    new JpegWalker(data).run();
  } catch (err) {
    if (!(err instanceof NotOurs)) throw err;
  }
}

// --- PNG ----------------------------------------------------------------------------------------

const u32be = (b: Uint8Array, at: number) => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };
const CRITICAL = new Set(['IHDR', 'PLTE', 'IDAT']);
/** Adam7: each pass's first column and row, and its steps. */
const ADAM7 = [
  [0, 0, 8, 8],
  [4, 0, 8, 8],
  [0, 4, 4, 8],
  [2, 0, 4, 4],
  [0, 2, 2, 4],
  [1, 0, 2, 2],
  [0, 1, 1, 2],
] as const;

/** The bytes the image data inflate to: per row a filter byte and its samples (each Adam7 pass's own rows). */
function inflatedSize(width: number, height: number, bitsPerPixel: number, interlaced: boolean): number {
  const row = (w: number) => 1 + Math.ceil((w * bitsPerPixel) / 8);
  if (!interlaced) return height * row(width);
  let total = 0;
  for (const [x0, y0, dx, dy] of ADAM7) {
    const w = Math.ceil((width - x0) / dx);
    const h = Math.ceil((height - y0) / dy);
    if (w > 0 && h > 0) total += h * row(w);
  }
  return total;
}

/** The chunk's type as text. */
function chunkType(b: Uint8Array, at: number): string {
  return String.fromCharCode(b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!);
}

async function checkPngData(b: Uint8Array, signal: AbortSignal | undefined): Promise<void> {
  if (b.length < 33 || chunkType(b, 12) !== 'IHDR') return; // the header check's verdict
  const width = u32be(b, 16);
  const height = u32be(b, 20);
  const depth = b[24]!;
  const channels = CHANNELS[b[25]!];
  if (channels === undefined || width === 0 || height === 0) return;
  const expected = inflatedSize(width, height, channels * depth, b[28] === 1);
  // The chunks up to the end of the first run of IDAT chunks, the critical ones with their CRC.
  const pieces: Uint8Array[] = [];
  let cut = false;
  for (let at = 8; ; ) {
    if (at + 8 > b.length) {
      cut = true;
      break;
    }
    const length = u32be(b, at);
    const type = chunkType(b, at + 4);
    if (pieces.length > 0 && type !== 'IDAT') break;
    if (at + 12 + length > b.length) {
      if (type === 'IDAT') pieces.push(b.subarray(at + 8, Math.min(b.length, at + 8 + length)));
      cut = true;
      break;
    }
    if (CRITICAL.has(type) && crc32(b.subarray(at + 4, at + 8 + length)) !== u32be(b, at + 8 + length)) broken(`PNG ${type} chunk fails its CRC`);
    if (type === 'IDAT') pieces.push(b.subarray(at + 8, at + 8 + length));
    if (type === 'IEND') break;
    at += 12 + length;
  }
  if (pieces.length === 0) {
    if (cut) broken('PNG file ends before its image data');
    return; // no image data: the decoder's verdict
  }
  const inflated = await inflatedBytes(pieces, expected, signal);
  // With every row there, a file cut after them is the decoder's to judge.
  if (inflated < expected) broken(cut ? 'PNG file ends before its last row' : 'PNG image data are corrupt or end before the last row');
}

/** Inflates the pieces of a zlib stream until `enough` bytes came out; how many did, when the stream failed or ended. */
function inflatedBytes(pieces: readonly Uint8Array[], enough: number, signal: AbortSignal | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    const inflate = zlib.createInflate({ chunkSize: 1 << 20 });
    let total = 0;
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      inflate.destroy();
      outcome();
    };
    const onAbort = () => settle(() => reject(signal!.reason));
    signal?.addEventListener('abort', onAbort, { once: true });
    inflate.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total >= enough) settle(() => resolve(total));
    });
    inflate.on('error', () => settle(() => resolve(total)));
    inflate.on('end', () => settle(() => resolve(total)));
    // One piece at a time, each once the last has been taken: the inflated bytes are never held.
    let next = 0;
    const write = () => {
      while (!settled && next < pieces.length) {
        if (!inflate.write(pieces[next++])) return void inflate.once('drain', write);
      }
      if (!settled && next === pieces.length) inflate.end();
    };
    write();
  });
}

// --- WebP ---------------------------------------------------------------------------------------

const u32le = (b: Uint8Array, at: number) => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16)) + b[at + 3]! * 0x1000000;

function checkWebpChunks(b: Uint8Array): void {
  for (let at = 12; ; ) {
    if (at + 8 > b.length) broken('WebP file ends before its bitstream');
    const type = chunkType(b, at);
    const size = u32le(b, at + 4);
    if (at + 8 + size > b.length) broken(`WebP ${type.trim()} chunk is cut short`);
    if (type === 'VP8 ' || type === 'VP8L') return;
    if (type === 'ANIM' || type === 'ANMF') return; // frames: the decoder's verdict
    at += 8 + size + (size & 1);
  }
}
