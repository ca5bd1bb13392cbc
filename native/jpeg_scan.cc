#include "jpeg_scan.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "errors.h"

namespace bgone {
namespace {

// A form this walker does not follow, or one libjpeg refuses by itself: no verdict here.
struct NotOurs {};

[[noreturn]] void broken(const char* what) { throw PipelineError(ErrorCode::InvalidImage, std::string("JPEG ") + what); }

// A Huffman table: codes of up to kFastBits bits by a lookup on the next kFastBits bits ((code
// length << 8) | symbol, 0 for a longer code), longer ones by the canonical code's bounds per length.
constexpr int kFastBits = 9;

struct Huffman {
  bool defined = false;
  int max_symbol = 0;
  uint16_t fast[1 << kFastBits];
  int32_t max_code[18];  // per length: the largest code of that length, -1 if none
  int32_t offset[17];    // per length: the index in `symbols` of a code, minus the code
  uint8_t symbols[256];
};

void build(Huffman& table, const uint8_t* counts, const uint8_t* symbols, int total) {
  std::fill_n(table.fast, 1 << kFastBits, 0);
  std::copy_n(symbols, total, table.symbols);
  table.max_symbol = total == 0 ? 0 : *std::max_element(symbols, symbols + total);
  int32_t code = 0;
  int n = 0;
  for (int len = 1; len <= 16; ++len) {
    table.offset[len] = n - code;
    for (int i = 0; i < counts[len - 1]; ++i, ++n, ++code) {
      if (len <= kFastBits) {
        std::fill_n(table.fast + (code << (kFastBits - len)), 1 << (kFastBits - len), static_cast<uint16_t>((len << 8) | symbols[n]));
      }
    }
    table.max_code[len] = counts[len - 1] == 0 ? -1 : code - 1;
    if (code >= (1 << len)) throw NotOurs{};  // codes that do not fit (or all ones): libjpeg refuses the table
    code <<= 1;
  }
  table.max_code[17] = INT32_MAX;
  table.defined = true;
}

// The tables of the JPEG standard (ITU T.81, K.3), which libjpeg takes for tables 0 and 1 where a
// file defines none (Motion JPEG frames leave them out): counts per code length, then symbols.
constexpr uint8_t kStdDcCounts[2][16] = {{0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
                                         {0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0}};
constexpr uint8_t kStdDcSymbols[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
constexpr uint8_t kStdAcCounts[2][16] = {{0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125},
                                         {0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119}};
constexpr uint8_t kStdAcSymbols[2][162] = {
    {0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07, 0x22, 0x71, 0x14, 0x32, 0x81,
     0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0, 0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18,
     0x19, 0x1a, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
     0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75,
     0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99,
     0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
     0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5,
     0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa},
    {0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71, 0x13, 0x22, 0x32, 0x81, 0x08,
     0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0, 0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25,
     0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47,
     0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74,
     0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97,
     0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba,
     0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe2, 0xe3, 0xe4,
     0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa}};

// The entropy-coded bytes of a scan: stuffed 0xFF 0x00 read as 0xFF; a marker ends the data, and
// past it (or past the file) come zero bits, as libjpeg fills them.
class Bits {
 public:
  Bits(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}

  // Decodes one Huffman symbol, and skips the `symbol & value_mask` bits of the value that follow
  // it (a coefficient's size); false when the data end first.
  bool symbol(const Huffman& table, int& out, int value_mask = 0) {
    if (bits_ < 32) fill();
    const uint16_t entry = table.fast[acc_ >> (64 - kFastBits)];
    int len = entry >> 8;
    if (len != 0) {
      out = entry & 0xFF;
    } else {
      len = kFastBits + 1;
      while (len <= 16 && static_cast<int32_t>(acc_ >> (64 - len)) > table.max_code[len]) ++len;
      if (len > 16) broken("scan data hold an invalid Huffman code");
      out = table.symbols[table.offset[len] + static_cast<int32_t>(acc_ >> (64 - len))];
    }
    len += out & value_mask;
    if (len > bits_) return false;
    drop(len);
    return true;
  }

  // Reads n bits (0 to 16); false when the data end first.
  bool take(int n, uint32_t& value) {
    if (bits_ < n) {
      fill();
      if (bits_ < n) return false;
    }
    value = n == 0 ? 0 : static_cast<uint32_t>(acc_ >> (64 - n));
    drop(n);
    return true;
  }
  // Skips n bits (any number); false when the data end first.
  bool skip(int n) {
    uint32_t ignored;
    for (; n > 16; n -= 16) {
      if (!take(16, ignored)) return false;
    }
    return take(n, ignored);
  }

  // Ends a restart interval or the scan: drops the bits left (padding) and the bytes no block used
  // (libjpeg skips them with a warning), and reads the marker that follows. Returns it, or -1 where
  // the file ends first; the position is then after the marker.
  int next_marker() {
    acc_ = 0;
    bits_ = 0;
    at_marker_ = false;
    while (p_ < end_) {
      if (*p_ != 0xFF) {
        ++p_;
        continue;
      }
      const uint8_t* q = p_ + 1;
      while (q < end_ && *q == 0xFF) ++q;
      if (q >= end_) break;
      p_ = q + 1;
      if (*q != 0x00) return *q;
    }
    p_ = end_;
    return -1;
  }

  const uint8_t* position() const { return p_; }

 private:
  void fill() {
    while (bits_ <= 56 && !at_marker_) {
      if (p_ >= end_) {
        at_marker_ = true;
        break;
      }
      const uint8_t b = *p_;
      if (b == 0xFF) {
        const uint8_t* q = p_ + 1;
        while (q < end_ && *q == 0xFF) ++q;
        if (q >= end_ || *q != 0x00) {
          at_marker_ = true;  // stays on the marker's first 0xFF
          break;
        }
        p_ = q + 1;
      } else {
        ++p_;
      }
      acc_ |= static_cast<uint64_t>(b) << (56 - bits_);
      bits_ += 8;
    }
  }
  void drop(int n) {
    acc_ = n == 64 ? 0 : acc_ << n;
    bits_ -= n;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  uint64_t acc_ = 0;
  int bits_ = 0;
  bool at_marker_ = false;
};

struct Component {
  int id = 0, h = 1, v = 1;
  int blocks_w = 0, blocks_h = 0;  // the component's own blocks (a scan of it alone)
  int stride = 0;                  // blocks per row with the MCU padding of interleaved scans
  std::vector<uint64_t> nonzero;   // per block: AC coefficients nonzero so far (progressive refinement)
  int lowest_bit[64];              // per coefficient: the lowest bit coded so far, -1: none
};

struct Frame {
  bool progressive = false;
  int width = 0, height = 0;
  int mcus_w = 0, mcus_h = 0;
  std::vector<Component> components;
};

struct Scan {
  std::vector<Component*> components;
  std::vector<const Huffman*> dc, ac;
  int ss = 0, se = 63, ah = 0, al = 0;
};

class Walker {
 public:
  Walker(const uint8_t* data, size_t length) : data_(data), end_(data + length) {
    for (int i = 0; i < 2; ++i) {
      build(dc_[i], kStdDcCounts[i], kStdDcSymbols, 12);
      build(ac_[i], kStdAcCounts[i], kStdAcSymbols[i], 162);
    }
  }

  void run() {
    const uint8_t* p = data_ + 2;
    for (;;) {
      int marker = -1;
      while (p < end_ && marker < 0) {
        if (*p++ != 0xFF) continue;  // bytes outside a segment: libjpeg skips them with a warning
        while (p < end_ && *p == 0xFF) ++p;
        if (p < end_ && *p != 0x00) marker = *p;
        if (p < end_) ++p;
      }
      if (marker < 0) return;  // no end marker: libvips refuses a file cut short by itself
      if (marker == 0xD9) break;
      if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) continue;
      if (end_ - p < 2) return;
      const size_t length = (p[0] << 8) | p[1];
      if (length < 2 || static_cast<size_t>(end_ - p) < length) return;
      const uint8_t* segment = p + 2;
      const size_t size = length - 2;
      p += length;
      if (marker == 0xC0 || marker == 0xC1 || marker == 0xC2) {
        frame_header(segment, size, marker == 0xC2);
      } else if ((marker >= 0xC3 && marker <= 0xCF) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
        return;  // lossless, hierarchical or arithmetic coding: not followed here
      } else if (marker == 0xC4) {
        huffman_tables(segment, size);
      } else if (marker == 0xDD) {
        if (size < 2) return;
        restart_interval_ = (segment[0] << 8) | segment[1];
      } else if (marker == 0xDA) {
        if (frame_.components.empty()) return;
        p = scan(segment, size, p);
      }
    }
    // Every coefficient of every component coded down to its last bit: a progressive image cut
    // between two scans (and closed with an end marker) lacks some.
    for (const Component& c : frame_.components) {
      for (int k = 0; k < 64; ++k) {
        if (c.lowest_bit[k] != 0) broken("image ends before its scans have coded every coefficient");
      }
    }
  }

 private:
  void frame_header(const uint8_t* s, size_t size, bool progressive) {
    if (!frame_.components.empty() || size < 6) throw NotOurs{};
    frame_.progressive = progressive;
    frame_.height = (s[1] << 8) | s[2];
    frame_.width = (s[3] << 8) | s[4];
    const int count = s[5];
    if (frame_.width == 0 || frame_.height == 0 || count < 1 || count > 4 || size < 6 + 3 * static_cast<size_t>(count)) throw NotOurs{};
    int h_max = 1, v_max = 1;
    frame_.components.resize(count);
    for (int i = 0; i < count; ++i) {
      Component& c = frame_.components[i];
      c.id = s[6 + 3 * i];
      c.h = s[7 + 3 * i] >> 4;
      c.v = s[7 + 3 * i] & 15;
      if (c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4) throw NotOurs{};
      h_max = std::max(h_max, c.h);
      v_max = std::max(v_max, c.v);
      std::fill_n(c.lowest_bit, 64, -1);
    }
    frame_.mcus_w = (frame_.width + 8 * h_max - 1) / (8 * h_max);
    frame_.mcus_h = (frame_.height + 8 * v_max - 1) / (8 * v_max);
    for (Component& c : frame_.components) {
      const int samples_w = (frame_.width * c.h + h_max - 1) / h_max;
      const int samples_h = (frame_.height * c.v + v_max - 1) / v_max;
      c.blocks_w = (samples_w + 7) / 8;
      c.blocks_h = (samples_h + 7) / 8;
      c.stride = frame_.mcus_w * c.h;
    }
  }

  void huffman_tables(const uint8_t* s, size_t size) {
    while (size > 0) {
      if (size < 17) throw NotOurs{};
      const int cls = s[0] >> 4, id = s[0] & 15;
      if (cls > 1 || id > 3) throw NotOurs{};
      int total = 0;
      for (int i = 1; i <= 16; ++i) total += s[i];
      if (total > 256 || size < 17 + static_cast<size_t>(total)) throw NotOurs{};
      Huffman& table = (cls == 0 ? dc_ : ac_)[id];
      build(table, s + 1, s + 17, total);
      s += 17 + total;
      size -= 17 + total;
    }
  }

  // Walks one scan's data, from `data`; returns where the walk of the markers goes on.
  const uint8_t* scan(const uint8_t* s, size_t size, const uint8_t* data) {
    Scan sc;
    if (size < 1) throw NotOurs{};
    const int count = s[0];
    if (count < 1 || count > 4 || size < 4 + 2 * static_cast<size_t>(count)) throw NotOurs{};
    for (int i = 0; i < count; ++i) {
      const int id = s[1 + 2 * i];
      auto found = std::find_if(frame_.components.begin(), frame_.components.end(), [id](const Component& c) { return c.id == id; });
      if (found == frame_.components.end()) throw NotOurs{};
      const Huffman& dc = dc_[s[2 + 2 * i] >> 4 & 3];
      const Huffman& ac = ac_[s[2 + 2 * i] & 3];
      sc.components.push_back(&*found);
      sc.dc.push_back(&dc);
      sc.ac.push_back(&ac);
    }
    const uint8_t* params = s + 1 + 2 * count;
    if (frame_.progressive) {
      sc.ss = params[0];
      sc.se = params[1];
      sc.ah = params[2] >> 4;
      sc.al = params[2] & 15;
      // What libjpeg refuses (JERR_BAD_PROGRESSION).
      const bool dc_band = sc.ss == 0;
      if (dc_band ? sc.se != 0 : (sc.ss > sc.se || sc.se > 63 || count != 1)) throw NotOurs{};
      if ((sc.ah != 0 && sc.al != sc.ah - 1) || sc.al > 13) throw NotOurs{};
    }
    // The tables this scan decodes with must be defined (libjpeg refuses the scan otherwise).
    for (int i = 0; i < count; ++i) {
      const bool needs_dc = !frame_.progressive || (sc.ss == 0 && sc.ah == 0);
      const bool needs_ac = !frame_.progressive || sc.ss > 0;
      if (needs_dc && (!sc.dc[i]->defined || sc.dc[i]->max_symbol > 15)) throw NotOurs{};
      if (needs_ac && !sc.ac[i]->defined) throw NotOurs{};
    }
    if (frame_.progressive && sc.ss > 0 && sc.components[0]->nonzero.empty()) {
      Component& c = *sc.components[0];
      c.nonzero.assign(static_cast<size_t>(c.stride) * frame_.mcus_h * c.v, 0);
    }

    Bits bits(data, end_);
    const bool interleaved = count > 1;
    const long mcus = interleaved ? static_cast<long>(frame_.mcus_w) * frame_.mcus_h
                                  : static_cast<long>(sc.components[0]->blocks_w) * sc.components[0]->blocks_h;
    eob_run_ = 0;
    for (long m = 0; m < mcus; ++m) {
      if (restart_interval_ > 0 && m > 0 && m % restart_interval_ == 0) {
        const int marker = bits.next_marker();
        if (marker < 0xD0 || marker > 0xD7) broken("scan data end before its last block");
        eob_run_ = 0;
      }
      if (!interleaved) {
        Component& c = *sc.components[0];
        const int bx = static_cast<int>(m % c.blocks_w), by = static_cast<int>(m / c.blocks_w);
        block(bits, sc, 0, c, static_cast<size_t>(by) * c.stride + bx);
        continue;
      }
      for (int i = 0; i < count; ++i) {
        Component& c = *sc.components[i];
        for (int n = 0; n < c.h * c.v; ++n) block(bits, sc, i, c, 0);
      }
    }
    for (Component* c : sc.components) {
      for (int k = frame_.progressive ? sc.ss : 0; k <= (frame_.progressive ? sc.se : 63); ++k)
        c->lowest_bit[k] = frame_.progressive ? sc.al : 0;
    }
    // Back to the marker that ends the scan, for the walk of the markers.
    const int marker = bits.next_marker();
    return marker < 0 ? end_ : bits.position() - 2;
  }

  void block(Bits& bits, const Scan& sc, int i, Component& c, size_t index) {
    const bool ok = !frame_.progressive ? sequential(bits, *sc.dc[i], *sc.ac[i])
                    : sc.ss == 0        ? (sc.ah == 0 ? dc_first(bits, *sc.dc[i]) : bits.skip(1))
                    : sc.ah == 0        ? ac_first(bits, sc, *sc.ac[i], c.nonzero[index])
                                        : ac_refine(bits, sc, *sc.ac[i], c.nonzero[index]);
    if (!ok) broken("scan data end before its last block");
  }

  static bool dc_first(Bits& bits, const Huffman& dc) {
    int s;
    return bits.symbol(dc, s, 15);
  }

  static bool sequential(Bits& bits, const Huffman& dc, const Huffman& ac) {
    if (!dc_first(bits, dc)) return false;
    for (int k = 1; k < 64;) {
      int rs;
      if (!bits.symbol(ac, rs, 15)) return false;
      const int r = rs >> 4, s = rs & 15;
      if (s != 0) {
        k += r + 1;
      } else if (r == 15) {
        k += 16;
      } else {
        break;
      }
    }
    return true;
  }

  bool ac_first(Bits& bits, const Scan& sc, const Huffman& ac, uint64_t& nonzero) {
    if (eob_run_ > 0) {
      --eob_run_;
      return true;
    }
    for (int k = sc.ss; k <= sc.se;) {
      int rs;
      if (!bits.symbol(ac, rs, 15)) return false;
      const int r = rs >> 4, s = rs & 15;
      if (s != 0) {
        k += r;
        if (k < 64) nonzero |= uint64_t{1} << k;
        ++k;
      } else if (r == 15) {
        k += 16;
      } else {
        uint32_t extra = 0;
        if (!bits.take(r, extra)) return false;
        eob_run_ = (1u << r) + extra - 1;
        break;
      }
    }
    return true;
  }

  bool ac_refine(Bits& bits, const Scan& sc, const Huffman& ac, uint64_t& nonzero) {
    int k = sc.ss;
    if (eob_run_ == 0) {
      for (; k <= sc.se; ++k) {
        int rs;
        if (!bits.symbol(ac, rs)) return false;
        int r = rs >> 4;
        const int s = rs & 15;
        int pending = s != 0 ? 1 : 0;  // the new coefficient's sign (its size is always 1)
        if (s == 0 && r != 15) {
          uint32_t extra = 0;
          if (!bits.take(r, extra)) return false;
          eob_run_ = (1u << r) + extra;
          break;
        }
        // Past the coefficients already nonzero (a correction bit each) and r still zero.
        for (; k <= sc.se; ++k) {
          if (nonzero >> k & 1) {
            ++pending;
          } else if (--r < 0) {
            break;
          }
        }
        if (!bits.skip(pending)) return false;
        if (s != 0 && k <= sc.se) nonzero |= uint64_t{1} << k;
      }
    }
    if (eob_run_ > 0) {
      // A correction bit for each coefficient already nonzero from k to the band's end.
      if (k <= sc.se) {
        const uint64_t band = (sc.se == 63 ? ~uint64_t{0} : (uint64_t{1} << (sc.se + 1)) - 1) & ~((uint64_t{1} << k) - 1);
        if (!bits.skip(__builtin_popcountll(nonzero & band))) return false;
      }
      --eob_run_;
    }
    return true;
  }

  const uint8_t* data_;
  const uint8_t* end_;
  Frame frame_;
  Huffman dc_[4], ac_[4];
  long restart_interval_ = 0;
  uint32_t eob_run_ = 0;
};

}  // namespace

void check_jpeg_scans(const uint8_t* data, size_t length) {
  if (length < 4) return;
  try {
    Walker(data, length).run();
  } catch (const NotOurs&) {
  }
}

}  // namespace bgone
