#include "png_writer.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "buffers.h"
#include "errors.h"
#include "parallel.h"
#include "png_deflate.h"

namespace bgone {
namespace {

// The part of zlib's ABI used here, as zlib.h declares it (unchanged since zlib 1.0): the headers
// are not among those an addon builds against, and the functions come from the running process.
struct ZStream {
  const uint8_t* next_in;
  unsigned avail_in;
  unsigned long total_in;
  uint8_t* next_out;
  unsigned avail_out;
  unsigned long total_out;
  const char* msg;
  void* state;
  void* (*zalloc)(void*, unsigned, unsigned);
  void (*zfree)(void*, void*);
  void* opaque;
  int data_type;
  unsigned long adler;
  unsigned long reserved;
};
constexpr int kZOk = 0, kZStreamEnd = 1;
constexpr int kZNoFlush = 0, kZSyncFlush = 2, kZFinish = 4;
constexpr int kZDeflated = 8, kZDefaultStrategy = 0;
constexpr int kRawWindowBits = -15;  // a raw deflate stream: the zlib header and checksum are ours
constexpr int kMemLevel = 8;

struct Zlib {
  int (*deflate_init2)(ZStream*, int, int, int, int, int, const char*, int);
  int (*deflate)(ZStream*, int);
  int (*deflate_end)(ZStream*);
  unsigned long (*deflate_bound)(ZStream*, unsigned long);
  unsigned long (*crc32)(unsigned long, const uint8_t*, unsigned);
  unsigned long (*adler32_combine)(unsigned long, unsigned long, long);
};

template <class F>
bool find(F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  return fn != nullptr;
}

// The process's zlib, or nullptr when it does not export one.
const Zlib* zlib() {
  static const Zlib* found = [] {
    static Zlib z;
    const bool all = find(z.deflate_init2, "deflateInit2_") && find(z.deflate, "deflate") && find(z.deflate_end, "deflateEnd") &&
                     find(z.deflate_bound, "deflateBound") && find(z.crc32, "crc32") && find(z.adler32_combine, "adler32_combine");
    return all ? &z : nullptr;
  }();
  return found;
}

// The most a PNG chunk may hold (the format's own limit). The IDAT chunk is checked against it
// before anything is written; everything a checksum is taken over is smaller, so zlib's 32-bit
// lengths always suffice.
constexpr size_t kMaxChunk = 0x7FFFFFFF;

// Pixels per segment: each segment costs a flush (a few bytes) and, for zlib, a cold start of its
// matches (a few hundred bytes); 2 MiB makes 4 segments at 2 MP, 23 at 12 MP. Our own deflate
// keeps nothing from one block to the next anyway, so its segments are halved: the free cores then
// share a cut-out's slow rows (the subject) and fast ones (transparency) more evenly, at the same
// CPU (smaller segments cost more CPU than they save).
constexpr size_t kSegmentBytes = size_t{2} << 20;
constexpr size_t kFastSegmentBytes = size_t{1} << 20;
// The level whose deflate is ours (png_deflate.h); every other level is zlib's.
constexpr int kOwnDeflateLevel = 1;
// Rows filtered and deflated per call: small enough to stay in the cache.
constexpr size_t kFilterBlockBytes = size_t{256} << 10;
constexpr uint8_t kFilterUp = 2;

// One run of rows, filtered and deflated into `out` (a raw deflate stream that ends on a byte
// boundary; the last segment's ends the stream).
struct Segment {
  int first_row = 0, end_row = 0;
  size_t raw_bytes = 0;  // its rows filtered: a filter byte and the pixels of each
  Buffer<uint8_t> out;
  size_t size = 0;
  unsigned long adler = 1;
};

// The image being written: its size and where its rows come from.
struct Image {
  int width, height, bands;
  const PngRows& rows;
  size_t stride() const { return static_cast<size_t>(width) * bands; }
};

// Filters the segment's rows ("up") a cache-sized block at a time, handing each block to
// `consume(data, n, last_block)` and taking its Adler-32 sum.
template <class Consume>
void filter_segment(const Image& image, Segment& seg, Consume&& consume) {
  const size_t stride = image.stride(), row_bytes = stride + 1;
  const int block_rows = std::max<int>(1, static_cast<int>(kFilterBlockBytes / row_bytes));
  Buffer<uint8_t> block(static_cast<size_t>(block_rows) * row_bytes);
  // The row above (for the "up" filter): zeros above the image, else made once more here.
  Buffer<uint8_t> above(stride), current(stride);
  if (seg.first_row == 0) {
    std::fill(above.begin(), above.end(), 0);
  } else {
    image.rows(seg.first_row - 1, above.data());
  }
  for (int y0 = seg.first_row; y0 < seg.end_row; y0 += block_rows) {
    const int y1 = std::min(seg.end_row, y0 + block_rows);
    for (int y = y0; y < y1; ++y) {
      uint8_t* dst = block.data() + static_cast<size_t>(y - y0) * row_bytes;
      image.rows(y, current.data());
      dst[0] = kFilterUp;
      for (size_t i = 0; i < stride; ++i) dst[1 + i] = static_cast<uint8_t>(current[i] - above[i]);
      above.swap(current);
    }
    const size_t n = static_cast<size_t>(y1 - y0) * row_bytes;
    seg.adler = adler32(static_cast<uint32_t>(seg.adler), block.data(), n);
    consume(block.data(), n, y1 == seg.end_row);
  }
}

// pngCompression 1: our own encoder (png_deflate.h).
void fast_deflate_segment(const Image& image, bool last, Segment& seg) {
  FastDeflate deflater(image.bands, seg.raw_bytes);
  filter_segment(image, seg, [&](const uint8_t* data, size_t n, bool) { deflater.add(data, n); });
  deflater.finish(last);
  seg.size = deflater.size();
  seg.out = std::move(deflater.output());
}

// Other levels: zlib's.
void zlib_deflate_segment(const Zlib& z, const Image& image, int level, bool last, Segment& seg) {
  ZStream s{};
  if (z.deflate_init2(&s, level, kZDeflated, kRawWindowBits, kMemLevel, kZDefaultStrategy, "1", sizeof(ZStream)) != kZOk) {
    throw PipelineError(ErrorCode::Internal, "zlib refused to start");
  }
  try {
    seg.out.resize(z.deflate_bound(&s, seg.raw_bytes) + 64);
    s.next_out = seg.out.data();
    s.avail_out = static_cast<unsigned>(seg.out.size());  // a segment is a few MiB
    filter_segment(image, seg, [&](const uint8_t* data, size_t n, bool end) {
      s.next_in = data;
      s.avail_in = static_cast<unsigned>(n);
      const int rc = z.deflate(&s, end ? (last ? kZFinish : kZSyncFlush) : kZNoFlush);
      if (rc != (end && last ? kZStreamEnd : kZOk) || s.avail_in != 0) throw PipelineError(ErrorCode::Internal, "zlib failed");
    });
    seg.size = s.total_out;
  } catch (...) {
    z.deflate_end(&s);
    throw;
  }
  z.deflate_end(&s);
}

void deflate_segment(const Zlib& z, const Image& image, int level, bool last, Segment& seg) {
  if (level == kOwnDeflateLevel) {
    fast_deflate_segment(image, last, seg);
  } else {
    zlib_deflate_segment(z, image, level, last, seg);
  }
}

void put32(uint8_t*& p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
  p += 4;
}

// Writes a chunk's type and data (already at p + 8) with its length before and CRC after.
void close_chunk(const Zlib& z, uint8_t*& p, const char* type, size_t length) {
  put32(p, static_cast<uint32_t>(length));
  std::memcpy(p, type, 4);
  const unsigned long crc = z.crc32(z.crc32(0, nullptr, 0), p, static_cast<unsigned>(length + 4));
  p += 4 + length;
  put32(p, static_cast<uint32_t>(crc));
}

// A whole zlib stream (header, deflate, Adler-32) of `in`, at zlib's default level: the iCCP's.
std::vector<uint8_t> zlib_compress(const Zlib& z, const std::vector<uint8_t>& in) {
  ZStream s{};
  constexpr int kZlibWindowBits = 15, kDefaultLevel = 6;
  if (z.deflate_init2(&s, kDefaultLevel, kZDeflated, kZlibWindowBits, kMemLevel, kZDefaultStrategy, "1", sizeof(ZStream)) != kZOk)
    throw PipelineError(ErrorCode::Internal, "zlib failed");
  std::vector<uint8_t> out(z.deflate_bound(&s, static_cast<unsigned long>(in.size())) + 16);
  s.next_in = in.data();
  s.avail_in = static_cast<unsigned>(in.size());
  s.next_out = out.data();
  s.avail_out = static_cast<unsigned>(out.size());
  const int rc = z.deflate(&s, kZFinish);
  const size_t written = s.total_out;
  z.deflate_end(&s);
  if (rc != kZStreamEnd) throw PipelineError(ErrorCode::Internal, "zlib failed");
  out.resize(written);
  return out;
}

}  // namespace

bool png_writer_available() { return zlib() != nullptr; }

Encoded encode_png_rows(int width, int height, int bands, int level, int dpi, const PngRows& rows, const OutputMetadata& meta) {
  const Zlib* z = zlib();
  if (z == nullptr) throw PipelineError(ErrorCode::Internal, "no zlib in this process");
  const Image px{width, height, bands, rows};
  const uint8_t colour_type = px.bands == 1 ? 0 : px.bands == 3 ? 2 : px.bands == 4 ? 6 : 255;
  if (colour_type == 255) throw PipelineError(ErrorCode::Internal, "unexpected bands for PNG");
  // Segments of about kSegmentBytes of pixels, taken by the free cores in turn. Their number
  // depends on the image alone, never on the load: the same job gives the same bytes.
  const size_t stride = px.stride();
  const size_t segment_bytes = level == kOwnDeflateLevel ? kFastSegmentBytes : kSegmentBytes;
  const size_t by_size = (stride * px.height + segment_bytes - 1) / segment_bytes;
  const int count = static_cast<int>(std::max<size_t>(1, std::min<size_t>(by_size, static_cast<size_t>(px.height))));
  std::vector<Segment> segments(count);
  for (int i = 0; i < count; ++i) {
    segments[i].first_row = static_cast<int>(static_cast<long long>(px.height) * i / count);
    segments[i].end_row = static_cast<int>(static_cast<long long>(px.height) * (i + 1) / count);
    segments[i].raw_bytes = (stride + 1) * (segments[i].end_row - segments[i].first_row);
  }
  parallel_for(count, [&](int i) { deflate_segment(*z, px, level, i == count - 1, segments[i]); });

  unsigned long adler = segments[0].adler;
  size_t compressed = 0;
  for (int i = 0; i < count; ++i) {
    if (i > 0) adler = z->adler32_combine(adler, segments[i].adler, static_cast<long>(segments[i].raw_bytes));
    compressed += segments[i].size;
  }
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  const size_t idat = 2 + compressed + 4;  // zlib header, the deflate stream, Adler-32
  if (idat > kMaxChunk) throw PipelineError(ErrorCode::Internal, "the PNG's data does not fit in one chunk");
  const size_t phys = dpi > 0 ? 12 + 9 : 0;  // pHYs: x and y pixels per unit, the unit (1: metre)
  // The metadata's chunks: iCCP (keyword, NUL, method 0, the zlib stream), eXIf (the TIFF block),
  // iTXt (keyword, NUL, not compressed, method 0, no language, no translated keyword, the text).
  static const char kIccName[] = "ICC profile";
  static const char kXmpName[] = "XML:com.adobe.xmp";
  const std::vector<uint8_t> icc = meta.icc.empty() ? std::vector<uint8_t>() : zlib_compress(*z, meta.icc);
  const size_t iccp = icc.empty() ? 0 : sizeof(kIccName) + 1 + icc.size();
  const size_t exif = meta.exif.size();
  const size_t itxt = meta.xmp.empty() ? 0 : sizeof(kXmpName) + 4 + meta.xmp.size();
  for (size_t chunk : {iccp, exif, itxt})
    if (chunk > kMaxChunk) throw PipelineError(ErrorCode::Internal, "the PNG's metadata does not fit in one chunk");
  const size_t extra = (iccp ? 12 + iccp : 0) + (exif ? 12 + exif : 0) + (itxt ? 12 + itxt : 0);
  const size_t total = sizeof(kSignature) + (12 + 13) + phys + extra + (12 + idat) + 12;
  Encoded out;
  out.data = alloc_output(total);
  out.length = total;
  out.own = true;
  uint8_t* p = static_cast<uint8_t*>(out.data);
  std::memcpy(p, kSignature, sizeof(kSignature));
  p += sizeof(kSignature);
  {
    uint8_t* data = p + 8;
    put32(data, static_cast<uint32_t>(px.width));
    put32(data, static_cast<uint32_t>(px.height));
    const uint8_t rest[5] = {8, colour_type, 0, 0, 0};  // bit depth, colour type, deflate, adaptive filters, no interlace
    std::memcpy(data, rest, 5);
    close_chunk(*z, p, "IHDR", 13);
  }
  if (iccp > 0) {  // before the IDAT (and any PLTE)
    uint8_t* data = p + 8;
    std::memcpy(data, kIccName, sizeof(kIccName));
    data[sizeof(kIccName)] = 0;  // compression method: deflate
    std::memcpy(data + sizeof(kIccName) + 1, icc.data(), icc.size());
    close_chunk(*z, p, "iCCP", iccp);
  }
  if (dpi > 0) {  // before the IDAT, as the format requires
    uint8_t* data = p + 8;
    const uint32_t per_metre = static_cast<uint32_t>(std::lround(dpi / 0.0254));
    put32(data, per_metre);
    put32(data, per_metre);
    *data = 1;
    close_chunk(*z, p, "pHYs", 9);
  }
  if (exif > 0) {
    std::memcpy(p + 8, meta.exif.data(), exif);
    close_chunk(*z, p, "eXIf", exif);
  }
  if (itxt > 0) {
    uint8_t* data = p + 8;
    std::memcpy(data, kXmpName, sizeof(kXmpName));  // with its NUL
    data += sizeof(kXmpName);
    const uint8_t flags[3] = {0, 0, 0};  // not compressed, method 0, empty language tag (its NUL)
    std::memcpy(data, flags, 3);
    data[3] = 0;  // empty translated keyword's NUL
    std::memcpy(data + 4, meta.xmp.data(), meta.xmp.size());
    close_chunk(*z, p, "iTXt", itxt);
  }
  {
    uint8_t* data = p + 8;
    *data++ = 0x78;  // deflate with a 32 KiB window...
    *data++ = 0x01;  // ...no preset dictionary, fastest; (0x78 * 256 + 0x01) % 31 == 0
    // The segments copied in by the free cores at once: the output's pages are in (alloc_output),
    // but on our VMs the first write to each 4 KiB page still traps (the first copy takes 50 times
    // a second one), and two cores share that.
    std::vector<size_t> offsets(count);
    for (int i = 1; i < count; ++i) offsets[i] = offsets[i - 1] + segments[i - 1].size;
    parallel_for(count, [&](int i) { std::memcpy(data + offsets[i], segments[i].out.data(), segments[i].size); });
    data += compressed;
    put32(data, static_cast<uint32_t>(adler));
    close_chunk(*z, p, "IDAT", idat);
  }
  close_chunk(*z, p, "IEND", 0);
  return out;
}

}  // namespace bgone
