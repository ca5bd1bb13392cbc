#include "png_deflate.h"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace bgone {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the match search and the bit writer assume little-endian words");

constexpr int kMinMatch = 4;  // shorter matches cost about what their literals do
constexpr int kMaxMatch = 258;
constexpr int kLitCodes = FastDeflate::kLitCodes, kDistCodes = FastDeflate::kDistCodes, kLengthCodes = 19;
constexpr int kEndOfBlock = 256;

uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The length of the match at distance d, at least kMinMatch bytes (checked by the caller).
size_t match_length(const uint8_t* p, size_t d, size_t available) {
  const size_t max = std::min<size_t>(kMaxMatch, available);
  size_t len = kMinMatch;
#if defined(__SSE2__)
  // 16 bytes a step: most of the matches are the transparent background's, 258 bytes long.
  while (len + 16 <= max) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + len));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + len - d));
    const unsigned differ = ~static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(a, b))) & 0xFFFFu;
    if (differ != 0) return len + static_cast<size_t>(__builtin_ctz(differ));
    len += 16;
  }
#endif
  while (len + 8 <= max) {
    const uint64_t diff = load64(p + len) ^ load64(p + len - d);
    if (diff != 0) return len + static_cast<size_t>(__builtin_ctzll(diff)) / 8;
    len += 8;
  }
  while (len < max && p[len] == p[len - d]) ++len;
  return len;
}

// RFC 1951 3.2.5: the length symbols 257-285, the first length of each and its extra bits.
constexpr int kLengthBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr int kLengthExtraBits[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};

// Each match length's symbol and extra bits.
struct LengthCode {
  uint16_t symbol;
  uint8_t extra_bits;
  uint16_t extra;
};
const std::array<LengthCode, kMaxMatch + 1>& length_codes() {
  static const std::array<LengthCode, kMaxMatch + 1> table = [] {
    std::array<LengthCode, kMaxMatch + 1> t{};
    for (int code = 0; code < 29; ++code) {
      const int end = code == 28 ? kMaxMatch + 1 : kLengthBase[code + 1];
      for (int len = kLengthBase[code]; len < end; ++len) {
        t[len] = {static_cast<uint16_t>(257 + code), static_cast<uint8_t>(kLengthExtraBits[code]),
                  static_cast<uint16_t>(len - kLengthBase[code])};
      }
    }
    return t;
  }();
  return table;
}

// Distances 1 to 4 are the codes 0 to 3, without extra bits.
int distance_code(uint32_t d) { return static_cast<int>(d) - 1; }

uint32_t reverse_bits(uint32_t code, int length) {
  uint32_t r = 0;
  for (int i = 0; i < length; ++i, code >>= 1) r = (r << 1) | (code & 1);
  return r;
}

// Huffman code lengths of at most `limit` bits for the symbols with a count (at least two of them):
// an optimal tree, then the deepest codes moved up the way the JPEG standard's Annex K.3 does it,
// which keeps the code complete. Ties are broken by symbol, so the lengths depend on the counts alone.
void code_lengths(const uint32_t* freq, int n, int limit, uint8_t* lengths) {
  std::fill(lengths, lengths + n, 0);
  int symbols[kLitCodes];
  int m = 0;
  for (int s = 0; s < n; ++s) {
    if (freq[s] != 0) symbols[m++] = s;
  }
  std::sort(symbols, symbols + m, [&](int a, int b) { return freq[a] != freq[b] ? freq[a] < freq[b] : a < b; });
  // Two queues: the leaves in order of weight, and the merged nodes, which come out in order too.
  uint64_t weight[2 * kLitCodes];
  int parent[2 * kLitCodes], depth[2 * kLitCodes];
  for (int i = 0; i < m; ++i) weight[i] = freq[symbols[i]];
  int leaf = 0, node = m;
  auto lightest = [&](int made) { return leaf < m && (node >= made || weight[leaf] <= weight[node]) ? leaf++ : node++; };
  for (int made = m; made < 2 * m - 1; ++made) {
    const int a = lightest(made), b = lightest(made);
    weight[made] = weight[a] + weight[b];
    parent[a] = parent[b] = made;
  }
  depth[2 * m - 2] = 0;
  for (int i = 2 * m - 3; i >= 0; --i) depth[i] = depth[parent[i]] + 1;  // a parent comes after its children
  int count[2 * kLitCodes] = {};
  int deepest = 0;
  for (int i = 0; i < m; ++i) {
    ++count[depth[i]];
    deepest = std::max(deepest, depth[i]);
  }
  for (int i = deepest; i > limit; --i) {
    while (count[i] > 0) {
      int j = i - 2;
      while (count[j] == 0) --j;
      count[i] -= 2;
      count[i - 1] += 1;
      count[j + 1] += 2;
      count[j] -= 1;
    }
  }
  // The longest codes to the rarest symbols.
  int length = std::min(deepest, limit);
  for (int i = 0; i < m; ++i) {
    while (count[length] == 0) --length;
    lengths[symbols[i]] = static_cast<uint8_t>(length);
    --count[length];
  }
}

// Canonical codes (RFC 1951 3.2.2), bit-reversed: deflate sends Huffman codes from their first bit.
void canonical_codes(const uint8_t* lengths, int n, uint16_t* codes) {
  int count[16] = {};
  for (int s = 0; s < n; ++s) ++count[lengths[s]];
  count[0] = 0;
  uint32_t next[16] = {};
  uint32_t code = 0;
  for (int bits = 1; bits < 16; ++bits) {
    code = (code + count[bits - 1]) << 1;
    next[bits] = code;
  }
  for (int s = 0; s < n; ++s) {
    codes[s] = lengths[s] != 0 ? static_cast<uint16_t>(reverse_bits(next[lengths[s]]++, lengths[s])) : 0;
  }
}

// A tree needs two codes to be complete: give unused symbols a count where fewer are used.
void at_least_two(uint32_t* freq, int n) {
  int used = 0;
  for (int s = 0; s < n; ++s) used += freq[s] != 0;
  for (int s = 0; s < n && used < 2; ++s) {
    if (freq[s] == 0) {
      freq[s] = 1;
      ++used;
    }
  }
}

}  // namespace

FastDeflate::FastDeflate(int pixel_bytes, size_t expected_bytes) : pixel_bytes_(std::clamp(pixel_bytes, 1, 4)) {
  symbols_.resize(kBlockSymbols);
  // Never more than stored blocks take (plus their headers); pages not written are never touched.
  out_.resize(expected_bytes + expected_bytes / 64 + 1024);
}

void FastDeflate::reserve(size_t bytes) {
  if (out_.size() < pos_ + bytes + 8) out_.resize(std::max(out_.size() * 2, pos_ + bytes + 8));
}

namespace {

// Appends `count` bits (at most 32) to the stream at out + pos, with `pending` bits (fewer than 8)
// not yet whole bytes. Branch-free: the whole 64-bit buffer is stored at the write position every
// time (reserve keeps 8 bytes of slack) and the position moves by the whole bytes.
inline void put_bits(uint8_t* out, size_t& pos, uint64_t& pending, int& pending_count, uint32_t bits, int count) {
  pending |= static_cast<uint64_t>(bits) << pending_count;
  pending_count += count;
  std::memcpy(out + pos, &pending, 8);
  const int bytes = pending_count >> 3;  // at most 4: fewer than 8 bits were pending
  pos += bytes;
  pending >>= bytes * 8;
  pending_count &= 7;
}

}  // namespace

void FastDeflate::put(uint32_t bits, int count) { put_bits(out_.data(), pos_, bits_, bit_count_, bits, count); }

void FastDeflate::align() {
  if (bit_count_ > 0) out_[pos_++] = static_cast<uint8_t>(bits_);
  bits_ = 0;
  bit_count_ = 0;
}

void FastDeflate::add(const uint8_t* data, size_t n) {
  size_t i = 0;
  while (i < n) {
    const size_t start = i;
    parse_block(data, n, i);
    write_block(data + start, i - start);
  }
}

// Turns bytes from i on into symbols, up to a block's worth, counting them.
void FastDeflate::parse_block(const uint8_t* data, size_t n, size_t& i) {
  std::fill(std::begin(lit_freq_), std::end(lit_freq_), 0u);
  std::fill(std::begin(dist_freq_), std::end(dist_freq_), 0u);
  const auto& lengths = length_codes();
  const size_t pixel = static_cast<size_t>(pixel_bytes_);
  int count = 0;
  while (i < n && count < kBlockSymbols) {
    size_t len = 0, distance = 0;
    if (i >= pixel && i + kMinMatch <= n) {
      const uint32_t here = load32(data + i);
      if (here == load32(data + i - pixel)) {
        distance = pixel;
      } else if (pixel > 1 && here == data[i - 1] * 0x01010101u) {
        distance = 1;
      }
      if (distance != 0) len = match_length(data + i, distance, n - i);
    }
    if (len != 0) {
      symbols_[count++] = static_cast<uint32_t>(len << 16 | distance);
      ++lit_freq_[lengths[len].symbol];
      ++dist_freq_[distance_code(static_cast<uint32_t>(distance))];
      i += len;
    } else {
      symbols_[count++] = data[i];
      ++lit_freq_[data[i]];
      ++i;
    }
  }
  symbol_count_ = count;
}

// Writes the parsed symbols as one block with its own Huffman codes, or the raw bytes as stored
// blocks when those are smaller (noise).
void FastDeflate::write_block(const uint8_t* raw, size_t raw_n) {
  lit_freq_[kEndOfBlock] = 1;
  at_least_two(lit_freq_, kLitCodes);
  at_least_two(dist_freq_, kDistCodes);
  uint8_t lit_len[kLitCodes], dist_len[kDistCodes];
  code_lengths(lit_freq_, kLitCodes, 15, lit_len);
  code_lengths(dist_freq_, kDistCodes, 15, dist_len);
  int hlit = kLitCodes, hdist = kDistCodes;
  while (hlit > 257 && lit_len[hlit - 1] == 0) --hlit;
  while (hdist > 1 && dist_len[hdist - 1] == 0) --hdist;
  uint8_t lengths[kLitCodes + kDistCodes];  // both sets of lengths, as the header gives them
  std::copy_n(lit_len, hlit, lengths);
  std::copy_n(dist_len, hdist, lengths + hlit);

  // The code lengths, run-length coded (RFC 1951 3.2.7): symbol | extra value << 8.
  uint16_t runs[kLitCodes + kDistCodes];
  int run_count = 0;
  uint32_t cl_freq[kLengthCodes] = {};
  const int total = hlit + hdist;
  for (int s = 0; s < total;) {
    const uint8_t v = lengths[s];
    int r = 1;
    while (s + r < total && lengths[s + r] == v) ++r;
    s += r;
    if (v == 0) {
      while (r >= 11) {
        const int take = std::min(r, 138);
        runs[run_count++] = static_cast<uint16_t>(18 | (take - 11) << 8);
        r -= take;
      }
      if (r >= 3) {
        runs[run_count++] = static_cast<uint16_t>(17 | (r - 3) << 8);
        r = 0;
      }
    } else {
      runs[run_count++] = v;
      --r;
      while (r >= 3) {
        const int take = std::min(r, 6);
        runs[run_count++] = static_cast<uint16_t>(16 | (take - 3) << 8);
        r -= take;
      }
    }
    for (; r > 0; --r) runs[run_count++] = v;
  }
  for (int k = 0; k < run_count; ++k) ++cl_freq[runs[k] & 0xFF];
  at_least_two(cl_freq, kLengthCodes);
  uint8_t cl_len[kLengthCodes];
  code_lengths(cl_freq, kLengthCodes, 7, cl_len);
  static const int kOrder[kLengthCodes] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
  int hclen = kLengthCodes;
  while (hclen > 4 && cl_len[kOrder[hclen - 1]] == 0) --hclen;

  // The block's size both ways, in bits.
  static const int kRunExtra[3] = {2, 3, 7};
  const auto& lengths_table = length_codes();
  uint64_t bits = 3 + 5 + 5 + 4 + 3 * static_cast<uint64_t>(hclen);
  for (int k = 0; k < run_count; ++k) {
    const int sym = runs[k] & 0xFF;
    bits += cl_len[sym] + (sym >= 16 ? kRunExtra[sym - 16] : 0);
  }
  for (int s = 0; s < kLitCodes; ++s) bits += static_cast<uint64_t>(lit_freq_[s]) * lit_len[s];
  for (int code = 0; code < 29; ++code) bits += static_cast<uint64_t>(lit_freq_[257 + code]) * kLengthExtraBits[code];
  for (int d = 0; d < kDistCodes; ++d) bits += static_cast<uint64_t>(dist_freq_[d]) * dist_len[d];
  const size_t stored_pieces = std::max<size_t>(1, (raw_n + 65534) / 65535);
  const uint64_t stored_bits = 8 * (static_cast<uint64_t>(raw_n) + 5 * stored_pieces) + 7;
  if (bits >= stored_bits) {
    write_stored(raw, raw_n);
    return;
  }

  reserve(bits / 8 + 16);
  uint16_t lit_code[kLitCodes], dist_code[kDistCodes], cl_code[kLengthCodes];
  canonical_codes(lit_len, kLitCodes, lit_code);
  canonical_codes(dist_len, kDistCodes, dist_code);
  canonical_codes(cl_len, kLengthCodes, cl_code);
  put(0, 1);  // not the last block
  put(2, 2);  // dynamic Huffman codes
  put(static_cast<uint32_t>(hlit - 257), 5);
  put(static_cast<uint32_t>(hdist - 1), 5);
  put(static_cast<uint32_t>(hclen - 4), 4);
  for (int k = 0; k < hclen; ++k) put(cl_len[kOrder[k]], 3);
  for (int k = 0; k < run_count; ++k) {
    const int sym = runs[k] & 0xFF;
    put(cl_code[sym], cl_len[sym]);
    if (sym >= 16) put(runs[k] >> 8, kRunExtra[sym - 16]);
  }
  // The symbols, about one per output byte: the bit buffer lives in locals here, since every store
  // through the output's uint8_t* may alias the members, which put() would load and store again
  // for each code. Each literal's code and length come from one table entry.
  uint32_t lit_entry[256];
  for (int s = 0; s < 256; ++s) lit_entry[s] = lit_code[s] | static_cast<uint32_t>(lit_len[s]) << 24;
  uint8_t* out = out_.data();
  size_t pos = pos_;
  uint64_t pending = bits_;
  int pending_count = bit_count_;
  auto emit = [&](uint32_t code, int count) { put_bits(out, pos, pending, pending_count, code, count); };
  const uint32_t* symbols = symbols_.data();
  const int count = symbol_count_;
  for (int k = 0; k < count; ++k) {
    const uint32_t s = symbols[k];
    if (s < 256) {
      const uint32_t entry = lit_entry[s];
      const int length = static_cast<int>(entry >> 24);
      if (k + 1 < count && symbols[k + 1] < 256) {
        // Two literals in one write (at most 30 bits): the same bits, half the writes. Literals
        // come in long runs (a photo's residuals), and each write waits on the one before.
        const uint32_t next = lit_entry[symbols[++k]];
        emit((entry & 0xFFFF) | (next & 0xFFFF) << length, length + static_cast<int>(next >> 24));
      } else {
        emit(entry & 0xFFFF, length);
      }
      continue;
    }
    const LengthCode& lc = lengths_table[s >> 16];
    emit(lit_code[lc.symbol] | static_cast<uint32_t>(lc.extra) << lit_len[lc.symbol], lit_len[lc.symbol] + lc.extra_bits);
    const int d = distance_code(s & 0xFFFF);
    emit(dist_code[d], dist_len[d]);
  }
  pos_ = pos;
  bits_ = pending;
  bit_count_ = pending_count;
  put(lit_code[kEndOfBlock], lit_len[kEndOfBlock]);
}

void FastDeflate::write_stored(const uint8_t* raw, size_t raw_n) {
  reserve(raw_n + 5 * (raw_n / 65535 + 1) + 16);
  do {
    const size_t piece = std::min<size_t>(raw_n, 65535);
    put(0, 1);  // not the last block
    put(0, 2);  // stored
    align();
    const uint16_t len = static_cast<uint16_t>(piece), nlen = static_cast<uint16_t>(~len);
    out_[pos_++] = static_cast<uint8_t>(len);
    out_[pos_++] = static_cast<uint8_t>(len >> 8);
    out_[pos_++] = static_cast<uint8_t>(nlen);
    out_[pos_++] = static_cast<uint8_t>(nlen >> 8);
    std::memcpy(out_.data() + pos_, raw, piece);
    pos_ += piece;
    raw += piece;
    raw_n -= piece;
  } while (raw_n > 0);
}

void FastDeflate::finish(bool last) {
  reserve(16);
  if (last) {
    put(1, 1);  // the last block:
    put(1, 2);  // fixed codes,
    put(0, 7);  // nothing but its end
    align();
    return;
  }
  put(0, 1);  // an empty stored block: the output ends on a byte boundary
  put(0, 2);
  align();
  const uint8_t marker[4] = {0x00, 0x00, 0xFF, 0xFF};
  std::memcpy(out_.data() + pos_, marker, 4);
  pos_ += 4;
}

uint32_t adler32(uint32_t adler, const uint8_t* data, size_t n) {
  constexpr uint32_t kMod = 65521;
  constexpr size_t kMaxRun = 5552;  // the most bytes before the sums could overflow 32 bits
  uint32_t a = adler & 0xFFFF, b = adler >> 16;
  while (n > 0) {
    size_t run = std::min(n, kMaxRun);
    n -= run;
#if defined(__SSE2__)
    // 16 bytes at a time: a gains their sum; b gains 16 * a (as it was) plus the bytes weighted
    // 16, 15, ..., 1 by their position.
    const size_t vectors = run / 16;
    if (vectors > 0) {
      const __m128i zero = _mm_setzero_si128();
      const __m128i weights_lo = _mm_setr_epi16(16, 15, 14, 13, 12, 11, 10, 9), weights_hi = _mm_setr_epi16(8, 7, 6, 5, 4, 3, 2, 1);
      __m128i sum_a = zero, sum_b = zero, prior_a = zero;
      for (size_t v = 0; v < vectors; ++v, data += 16) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data));
        prior_a = _mm_add_epi32(prior_a, sum_a);
        sum_a = _mm_add_epi32(sum_a, _mm_sad_epu8(bytes, zero));
        sum_b = _mm_add_epi32(sum_b, _mm_madd_epi16(_mm_unpacklo_epi8(bytes, zero), weights_lo));
        sum_b = _mm_add_epi32(sum_b, _mm_madd_epi16(_mm_unpackhi_epi8(bytes, zero), weights_hi));
      }
      auto total = [](__m128i v) {
        alignas(16) uint32_t lanes[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(lanes), v);
        return static_cast<uint64_t>(lanes[0]) + lanes[1] + lanes[2] + lanes[3];
      };
      const uint64_t bytes_sum = total(sum_a), weighted = total(sum_b), before = total(prior_a);
      b = static_cast<uint32_t>((b + static_cast<uint64_t>(a) * 16 * vectors + 16 * before + weighted) % kMod);
      a = static_cast<uint32_t>((a + bytes_sum) % kMod);
      run -= vectors * 16;
    }
#endif
    for (; run > 0; --run) {
      a += *data++;
      b += a;
    }
    a %= kMod;
    b %= kMod;
  }
  return b << 16 | a;
}

}  // namespace bgone
