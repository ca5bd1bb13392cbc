#include "model_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "decode_progress.h"
#include "parallel.h"

namespace bgone {
namespace {

// Fixed point, as libvips does it for 8-bit images: weights in Q14 (their sum exactly 1 << 14, so a
// flat colour stays exact), the horizontal pass's result kept in Q6 16-bit integers, the vertical
// pass's in Q20. Integer multiply-adds in pairs (pmaddwd) do twice the work per instruction of the
// float version this replaced, and every build computes the very same integers.
constexpr int kWeightBits = 14, kMiddleBits = 6;
constexpr int kHorizontalShift = kWeightBits - kMiddleBits, kVerticalShift = kWeightBits + kMiddleBits;

// Lanczos-3, libvips' default kernel for resizing: what the model's input was made with before.
double lanczos3(double t) {
  t = std::fabs(t);
  if (t < 1e-9) return 1;
  if (t >= 3) return 0;
  const double p = M_PI * t;
  return 3 * std::sin(p) * std::sin(p / 3) / (p * p);
}

// One axis' filter: output i reads inputs first[i] .. first[i] + reads - 1 with weights
// weight[i * taps ..] (Q14). Taps past the image's edge are folded into its edge pixel (edges
// repeat). taps is even, so taps go in pairs: an odd count of reads gets a last weight of 0.
struct AxisFilter {
  int taps = 0, reads = 0;
  std::vector<int> first;
  std::vector<int16_t> weight;
};

AxisFilter axis_filter(int in, int out) {
  const double scale = static_cast<double>(in) / out;
  const double stretch = std::max(1.0, scale);  // shrinking widens the kernel: it averages
  const double support = 3 * stretch;
  const int full = static_cast<int>(std::ceil(2 * support)) + 1;
  const int used = std::min(full, in);  // the inputs one output reads
  AxisFilter f;
  f.reads = used;
  f.taps = used + (used & 1);
  f.first.resize(out);
  f.weight.assign(static_cast<size_t>(out) * f.taps, 0);
  std::vector<double> w(full), folded(used);
  for (int o = 0; o < out; ++o) {
    const double centre = (o + 0.5) * scale - 0.5;
    const int start = static_cast<int>(std::floor(centre - support)) + 1;
    double sum = 0;
    for (int k = 0; k < full; ++k) sum += w[k] = lanczos3((start + k - centre) / stretch);
    const int first = std::clamp(start, 0, in - used);
    std::fill(folded.begin(), folded.end(), 0.0);
    for (int k = 0; k < full; ++k) folded[std::clamp(start + k, 0, in - 1) - first] += w[k] / sum;
    // Rounded to Q14; what rounding takes from the sum goes to the largest weight.
    int16_t* q = f.weight.data() + static_cast<size_t>(o) * f.taps;
    int total = 0, largest = 0;
    for (int k = 0; k < used; ++k) {
      q[k] = static_cast<int16_t>(std::lround(folded[k] * (1 << kWeightBits)));
      total += q[k];
      if (q[k] > q[largest]) largest = k;
    }
    q[largest] = static_cast<int16_t>(q[largest] + (1 << kWeightBits) - total);
    f.first[o] = first;
  }
  return f;
}

// The horizontal pass's input: for each pixel j of a source row, its R, G, B, and one unused value,
// each beside the same of pixel j + 1 (the last pixel beside itself), as 16-bit integers: one
// pair of taps of a pixel is then one pmaddwd. Four bands are flattened on white first.
struct Pair {
  int16_t v[8];  // R_j, R_j+1, G_j, G_j+1, B_j, B_j+1, and two values never read back
};

void pair_row(const uint8_t* src, int w, int bands, uint8_t* flat, Pair* out) {
  const uint8_t* rgb = src;
  if (bands == 4) {
    // On white, rounded to bytes as libvips' flatten did.
    for (int x = 0; x < w; ++x) {
      const uint32_t a = src[x * 4 + 3], under = 255 * (255 - a);
      for (int c = 0; c < 3; ++c) flat[x * 3 + c] = static_cast<uint8_t>((src[x * 4 + c] * a + under + 127) / 255);
    }
    rgb = flat;
  }
  int x = 0;
#if defined(__SSE2__)
  // 4 bytes of pixel x and 4 of pixel x + 1, widened and interleaved: the fourth pair (the next
  // pixels' red) lands in the unused values, which are multiplied but never read back.
  const __m128i zero = _mm_setzero_si128();
  for (; x + 3 <= w; ++x) {
    int32_t here, next;
    std::memcpy(&here, rgb + static_cast<size_t>(x) * 3, 4);
    std::memcpy(&next, rgb + static_cast<size_t>(x) * 3 + 3, 4);
    const __m128i a = _mm_unpacklo_epi8(_mm_cvtsi32_si128(here), zero), b = _mm_unpacklo_epi8(_mm_cvtsi32_si128(next), zero);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x), _mm_unpacklo_epi16(a, b));
  }
#endif
  for (; x < w; ++x) {
    const uint8_t* p = rgb + static_cast<size_t>(x) * 3;
    const uint8_t* q = rgb + static_cast<size_t>(std::min(x + 1, w - 1)) * 3;
    out[x] = Pair{{p[0], q[0], p[1], q[1], p[2], q[2], 0, 0}};
  }
}

// Pixel x of the horizontal pass, in Q6: R, G, B, 0 as 32-bit integers.
#if defined(__SSE2__)
inline __m128i horizontal_pixel(const Pair* in, const AxisFilter& f, const __m128i* weights, int x) {
  const int pairs = f.taps / 2;
  const Pair* q = in + f.first[x];
  const __m128i* w = weights + static_cast<size_t>(x) * pairs;
  __m128i sum = _mm_setzero_si128();
  for (int m = 0; m < pairs; ++m)
    sum = _mm_add_epi32(sum, _mm_madd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * m)), _mm_loadu_si128(w + m)));
  return _mm_srai_epi32(_mm_add_epi32(sum, _mm_set1_epi32(1 << (kHorizontalShift - 1))), kHorizontalShift);
}
#endif

// Each output pixel's pairs of horizontal weights, each pair repeated for R, G, B and the unused
// value (what one pmaddwd multiplies a Pair by).
std::vector<int16_t> horizontal_weights(const AxisFilter& f) {
  const int pairs = f.taps / 2, out = static_cast<int>(f.first.size());
  std::vector<int16_t> lanes(static_cast<size_t>(out) * pairs * 8);
  for (int x = 0; x < out; ++x) {
    for (int m = 0; m < pairs; ++m) {
      int16_t* l = lanes.data() + (static_cast<size_t>(x) * pairs + m) * 8;
      for (int c = 0; c < 4; ++c) {
        l[c * 2] = f.weight[static_cast<size_t>(x) * f.taps + 2 * m];
        l[c * 2 + 1] = f.weight[static_cast<size_t>(x) * f.taps + 2 * m + 1];
      }
    }
  }
  return lanes;
}

// Each output row's pairs of vertical weights, each pair packed in 32 bits (what pmaddwd multiplies
// two interleaved rows by).
std::vector<int32_t> vertical_weights(const AxisFilter& f) {
  const int pairs = f.taps / 2, out = static_cast<int>(f.first.size());
  std::vector<int32_t> packed(static_cast<size_t>(out) * pairs);
  for (size_t i = 0; i < packed.size(); ++i) {
    packed[i] = static_cast<int32_t>(static_cast<uint16_t>(f.weight[2 * i]) |
                                     static_cast<uint32_t>(static_cast<uint16_t>(f.weight[2 * i + 1])) << 16);
  }
  return packed;
}

// A row of the horizontal pass: width pixels of R, G, B, 0 in Q6 16-bit integers.
void horizontal(const Pair* in, const AxisFilter& f, const std::vector<int16_t>& lanes, int width, int16_t* out) {
#if defined(__SSE2__)
  const __m128i* weights = reinterpret_cast<const __m128i*>(lanes.data());
  int x = 0;
#if defined(__AVX2__)
  // Two output pixels a step, one per 128-bit lane.
  const int pairs = f.taps / 2;
  const __m256i half = _mm256_set1_epi32(1 << (kHorizontalShift - 1));
  for (; x + 1 < width; x += 2) {
    const Pair* a = in + f.first[x];
    const Pair* b = in + f.first[x + 1];
    const __m128i* wa = weights + static_cast<size_t>(x) * pairs;
    const __m128i* wb = wa + pairs;
    __m256i sum = _mm256_setzero_si256();
    for (int m = 0; m < pairs; ++m) {
      const __m256i v = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b + 2 * m), reinterpret_cast<const __m128i*>(a + 2 * m));
      const __m256i w = _mm256_set_m128i(_mm_loadu_si128(wb + m), _mm_loadu_si128(wa + m));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(v, w));
    }
    sum = _mm256_srai_epi32(_mm256_add_epi32(sum, half), kHorizontalShift);
    const __m128i two = _mm_packs_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + static_cast<size_t>(x) * 4), two);
  }
#endif
  for (; x < width; ++x) {
    const __m128i v = horizontal_pixel(in, f, weights, x);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + static_cast<size_t>(x) * 4), _mm_packs_epi32(v, v));
  }
#else
  const int pairs = f.taps / 2;
  for (int x = 0; x < width; ++x) {
    const Pair* q = in + f.first[x];
    const int16_t* w = lanes.data() + static_cast<size_t>(x) * pairs * 8;
    for (int c = 0; c < 4; ++c) {
      int32_t sum = 0;
      for (int m = 0; m < pairs; ++m) sum += q[2 * m].v[c * 2] * w[m * 8 + c * 2] + q[2 * m].v[c * 2 + 1] * w[m * 8 + c * 2 + 1];
      out[x * 4 + c] = static_cast<int16_t>((sum + (1 << (kHorizontalShift - 1))) >> kHorizontalShift);
    }
  }
#endif
}

// Stores 2 pixels from 8 bytes R G B x R G B x (the second's fourth byte too unless it is the row's
// last pixel: the next store overwrites it).
inline void store_two(uint64_t bytes, uint8_t* d, bool last) {
  const uint32_t first = static_cast<uint32_t>(bytes), second = static_cast<uint32_t>(bytes >> 32);
  std::memcpy(d, &first, 4);
  std::memcpy(d + 3, &second, last ? 3 : 4);
}

// An output row from its `taps` rows of the horizontal pass (rows[k], weight w[k], Q14; the same
// weights packed in pairs), rounded to bytes (saturated to 0..255), RGB.
void vertical(const int16_t* const* rows, const int16_t* w, const int32_t* pairs, int taps, int width, uint8_t* dst) {
  const int n = width * 4;  // 16-bit values in a row
  int i = 0;
#if defined(__SSE2__)
  // Rows k and k + 1 interleaved value by value, times their two weights (pmaddwd).
  const int pair_count = taps / 2;
#if defined(__AVX2__)
  const __m256i half8 = _mm256_set1_epi32(1 << (kVerticalShift - 1));
  for (; i + 16 <= n; i += 16) {  // 4 pixels a step
    __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
    for (int m = 0; m < pair_count; ++m) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[2 * m] + i));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[2 * m + 1] + i));
      const __m256i weights = _mm256_set1_epi32(pairs[m]);
      lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), weights));
      hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), weights));
    }
    lo = _mm256_srai_epi32(_mm256_add_epi32(lo, half8), kVerticalShift);
    hi = _mm256_srai_epi32(_mm256_add_epi32(hi, half8), kVerticalShift);
    // Per 128-bit lane: its 8 values in order (unpack and pack both work within lanes).
    const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(lo, hi), _mm256_setzero_si256());
    uint8_t* d = dst + static_cast<size_t>(i / 4) * 3;
    store_two(static_cast<uint64_t>(_mm256_extract_epi64(bytes, 0)), d, false);
    store_two(static_cast<uint64_t>(_mm256_extract_epi64(bytes, 2)), d + 6, i + 16 == n);
  }
#endif
  const __m128i half = _mm_set1_epi32(1 << (kVerticalShift - 1));
  for (; i + 8 <= n; i += 8) {  // 2 pixels a step
    __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
    for (int m = 0; m < pair_count; ++m) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[2 * m] + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[2 * m + 1] + i));
      const __m128i weights = _mm_set1_epi32(pairs[m]);
      lo = _mm_add_epi32(lo, _mm_madd_epi16(_mm_unpacklo_epi16(a, b), weights));
      hi = _mm_add_epi32(hi, _mm_madd_epi16(_mm_unpackhi_epi16(a, b), weights));
    }
    lo = _mm_srai_epi32(_mm_add_epi32(lo, half), kVerticalShift);
    hi = _mm_srai_epi32(_mm_add_epi32(hi, half), kVerticalShift);
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(lo, hi), _mm_setzero_si128());
    uint64_t two;
    std::memcpy(&two, &bytes, 8);
    store_two(two, dst + static_cast<size_t>(i / 4) * 3, i + 8 == n);
  }
#endif
  for (; i < n; i += 4) {  // an odd pixel left, or everything without SSE2
    for (int c = 0; c < 3; ++c) {
      int32_t sum = 0;
      for (int k = 0; k < taps; ++k) sum += rows[k][i + c] * w[k];
      dst[(i / 4) * 3 + c] = static_cast<uint8_t>(std::clamp((sum + (1 << (kVerticalShift - 1))) >> kVerticalShift, 0, 255));
    }
  }
}

// Output rows y0 .. y1 - 1 of the model's input. Each band keeps the horizontal pass of the last
// fy.taps source rows in a ring (each source row serves several output rows). `ready(r)` is asked
// before source row r is read: false stops the band (the rows are not there and will not come).
template <class Ready>
bool resample_band(const uint8_t* pixels, int src_w, size_t src_stride, int bands, const AxisFilter& fx, const AxisFilter& fy,
                   const std::vector<int16_t>& lanes, const std::vector<int32_t>& pairs, int y0, int y1, Pixels& out, Ready&& ready) {
  const int width = out.width;
  const int ring = fy.reads;
  const size_t row_values = static_cast<size_t>(width) * 4;
  Buffer<int16_t> rows(static_cast<size_t>(ring) * row_values);
  Buffer<Pair> paired(src_w);
  Buffer<uint8_t> flat(bands == 4 ? static_cast<size_t>(src_w) * 3 : 0);
  std::vector<int> held(ring, -1);
  std::vector<const int16_t*> window(fy.taps);
  for (int y = y0; y < y1; ++y) {
    const int first = fy.first[y];
    for (int k = 0; k < fy.taps; ++k) {
      if (k == fy.reads) {  // the padding tap (weight 0): any row will do
        window[k] = window[k - 1];
        continue;
      }
      const int r = first + k, slot = r % ring;
      int16_t* row = rows.data() + static_cast<size_t>(slot) * row_values;
      window[k] = row;
      if (held[slot] == r) continue;
      if (!ready(r)) return false;
      held[slot] = r;
      pair_row(pixels + r * src_stride, src_w, bands, flat.data(), paired.data());
      horizontal(paired.data(), fx, lanes, width, row);
    }
    vertical(window.data(), fy.weight.data() + static_cast<size_t>(y) * fy.taps, pairs.data() + static_cast<size_t>(y) * (fy.taps / 2),
             fy.taps, width, out.data.data() + static_cast<size_t>(y) * width * 3);
  }
  return true;
}

Pixels output_for(int width, int height) {
  Pixels out;
  out.width = width;
  out.height = height;
  out.bands = 3;
  out.data.resize(static_cast<size_t>(width) * height * 3);
  return out;
}

}  // namespace

Pixels resample_for_model(const uint8_t* pixels, int src_w, int src_h, int bands, int width, int height, size_t src_stride) {
  if (src_stride == 0) src_stride = static_cast<size_t>(src_w) * bands;
  const AxisFilter fx = axis_filter(src_w, width), fy = axis_filter(src_h, height);
  const std::vector<int16_t> lanes = horizontal_weights(fx);
  const std::vector<int32_t> pairs = vertical_weights(fy);
  Pixels out = output_for(width, height);
  // A band of output rows per free core; at a band's start the rows before it are computed again
  // (a few rows in a thousand).
  parallel_bands(height, [&](int y0, int y1) {
    resample_band(pixels, src_w, src_stride, bands, fx, fy, lanes, pairs, y0, y1, out, [](int) { return true; });
  });
  return out;
}

bool resample_for_model_behind(DecodeProgress& progress, const Region* region, int width, int height, Pixels& out) {
  DecodeProgress::Image image;
  if (!progress.wait_start(image)) return false;
  const Region whole{0, 0, image.width, image.height};
  const Region r = region != nullptr ? *region : whole;
  if (r.x < 0 || r.y < 0 || r.w < 1 || r.h < 1 || r.x + r.w > image.width || r.y + r.h > image.height) return false;
  const size_t stride = static_cast<size_t>(image.width) * image.bands;
  const uint8_t* first = image.pixels + static_cast<size_t>(r.y) * stride + static_cast<size_t>(r.x) * image.bands;
  const AxisFilter fx = axis_filter(r.w, width), fy = axis_filter(r.h, height);
  const std::vector<int16_t> lanes = horizontal_weights(fx);
  const std::vector<int32_t> pairs = vertical_weights(fy);
  out = output_for(width, height);
  // Source rows are read in order, each once its strip is in memory: the output's rows one after
  // the other, on this thread alone (the decode has the other core).
  return resample_band(first, r.w, stride, image.bands, fx, fy, lanes, pairs, 0, height, out,
                       [&progress, &r](int row) { return progress.wait_rows(r.y + row + 1); });
}

}  // namespace bgone
