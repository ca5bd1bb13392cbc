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

#include "parallel.h"

namespace bgone {
namespace {

// Four floats, one pixel (R, G, B and a lane that is never read back): a tap of the horizontal
// pass is then one multiply and one add for the whole pixel.
typedef float Pixel4 __attribute__((vector_size(16)));

// Lanczos-3, libvips' default kernel for resizing: what the model's input was made with before.
double lanczos3(double t) {
  t = std::fabs(t);
  if (t < 1e-9) return 1;
  if (t >= 3) return 0;
  const double p = M_PI * t;
  return 3 * std::sin(p) * std::sin(p / 3) / (p * p);
}

// One axis' filter: output i reads inputs first[i] .. first[i] + taps - 1 with weights
// weight[i * taps ..]. Taps past the image's edge are folded into its edge pixel (edges repeat).
struct AxisFilter {
  int taps = 0;
  std::vector<int> first;
  std::vector<float> weight;
};

#if defined(__AVX2__)
// The horizontal weights of output pixels 2p and 2p + 1, tap by tap, each repeated over its pixel's
// four lanes: one load per tap for two pixels.
std::vector<float> paired_weights(const AxisFilter& f) {
  const int pairs = static_cast<int>(f.first.size()) / 2;
  std::vector<float> paired(static_cast<size_t>(pairs) * f.taps * 8);
  for (int p = 0; p < pairs; ++p) {
    for (int k = 0; k < f.taps; ++k) {
      float* lanes = paired.data() + (static_cast<size_t>(p) * f.taps + k) * 8;
      for (int l = 0; l < 4; ++l) {
        lanes[l] = f.weight[static_cast<size_t>(2 * p) * f.taps + k];
        lanes[4 + l] = f.weight[static_cast<size_t>(2 * p + 1) * f.taps + k];
      }
    }
  }
  return paired;
}
#endif

AxisFilter axis_filter(int in, int out) {
  const double scale = static_cast<double>(in) / out;
  const double stretch = std::max(1.0, scale);  // shrinking widens the kernel: it averages
  const double support = 3 * stretch;
  const int full = static_cast<int>(std::ceil(2 * support)) + 1;
  AxisFilter f;
  f.taps = std::min(full, in);
  f.first.resize(out);
  f.weight.assign(static_cast<size_t>(out) * f.taps, 0.f);
  std::vector<double> w(full), folded(f.taps);
  for (int o = 0; o < out; ++o) {
    const double centre = (o + 0.5) * scale - 0.5;
    const int start = static_cast<int>(std::floor(centre - support)) + 1;
    double sum = 0;
    for (int k = 0; k < full; ++k) sum += w[k] = lanczos3((start + k - centre) / stretch);
    const int first = std::clamp(start, 0, in - f.taps);
    std::fill(folded.begin(), folded.end(), 0.0);
    for (int k = 0; k < full; ++k) folded[std::clamp(start + k, 0, in - 1) - first] += w[k] / sum;
    f.first[o] = first;
    for (int k = 0; k < f.taps; ++k) f.weight[static_cast<size_t>(o) * f.taps + k] = static_cast<float>(folded[k]);
  }
  return f;
}

// One source row as floats, a Pixel4 per pixel; 4 bands are flattened on white.
void expand_row(const uint8_t* src, int w, int bands, Pixel4* out) {
  if (bands == 3) {
    int x = 0;
#if defined(__SSE2__)
    // GCC makes a byte-by-byte conversion of the plain loop; this takes 4 bytes at once (the 4th is
    // the next pixel's, in the lane never read back).
    const __m128i zero = _mm_setzero_si128();
    for (; x + 1 < w; ++x) {
      int32_t bytes;
      std::memcpy(&bytes, src + static_cast<size_t>(x) * 3, 4);
      const __m128i v = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(bytes), zero), zero);
      _mm_storeu_ps(reinterpret_cast<float*>(out + x), _mm_cvtepi32_ps(v));
    }
#endif
    for (; x < w; ++x) {
      const uint8_t* p = src + static_cast<size_t>(x) * 3;
      out[x] = Pixel4{static_cast<float>(p[0]), static_cast<float>(p[1]), static_cast<float>(p[2]), 0.f};
    }
    return;
  }
  for (int x = 0; x < w; ++x) {
    const uint8_t* p = src + static_cast<size_t>(x) * 4;
    const float a = p[3] / 255.f, under = 255.f * (1.f - a);
    out[x] = Pixel4{p[0] * a + under, p[1] * a + under, p[2] * a + under, 0.f};
  }
}

// Output pixel x of the horizontal pass. Two sums, even and odd taps: one sum chains each add on
// the last, and the adds' latency then set the pace.
inline Pixel4 horizontal_pixel(const Pixel4* in, const AxisFilter& f, int x) {
  const int taps = f.taps;
  const float* w = f.weight.data() + static_cast<size_t>(x) * taps;
  const Pixel4* q = in + f.first[x];
  Pixel4 even = {0, 0, 0, 0}, odd = {0, 0, 0, 0};
  int k = 0;
  for (; k + 1 < taps; k += 2) {
    even += w[k] * q[k];
    odd += w[k + 1] * q[k + 1];
  }
  if (k < taps) even += w[k] * q[k];
  return even + odd;
}

#if defined(__AVX2__)
// Two output pixels at once in eight lanes, with the same arithmetic per lane as horizontal_pixel
// (so both builds give the same bytes).
void horizontal(const Pixel4* in, const AxisFilter& f, const std::vector<float>& paired, int width, Pixel4* out) {
  const int taps = f.taps;
  int x = 0;
  for (; x + 1 < width; x += 2) {
    const float* w = paired.data() + static_cast<size_t>(x / 2) * taps * 8;
    const float* a = reinterpret_cast<const float*>(in + f.first[x]);
    const float* b = reinterpret_cast<const float*>(in + f.first[x + 1]);
    __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
    int k = 0;
    for (; k + 1 < taps; k += 2) {
      even = _mm256_add_ps(even, _mm256_mul_ps(_mm256_loadu_ps(w + k * 8), _mm256_loadu2_m128(b + k * 4, a + k * 4)));
      odd = _mm256_add_ps(odd, _mm256_mul_ps(_mm256_loadu_ps(w + k * 8 + 8), _mm256_loadu2_m128(b + k * 4 + 4, a + k * 4 + 4)));
    }
    if (k < taps) even = _mm256_add_ps(even, _mm256_mul_ps(_mm256_loadu_ps(w + k * 8), _mm256_loadu2_m128(b + k * 4, a + k * 4)));
    _mm256_storeu_ps(reinterpret_cast<float*>(out + x), _mm256_add_ps(even, odd));
  }
  if (x < width) out[x] = horizontal_pixel(in, f, x);
}
#else
void horizontal(const Pixel4* in, const AxisFilter& f, const std::vector<float>&, int width, Pixel4* out) {
  for (int x = 0; x < width; ++x) out[x] = horizontal_pixel(in, f, x);
}
#endif

// Rounds a row of Pixel4 sums to RGB bytes: +0.5, truncated, saturated to 0..255 by the packs
// (the same as clamping first). Each pixel's four bytes are stored and the next pixel overwrites
// the fourth; the last pixel stores three.
void store_rgb(const float* sum, int width, uint8_t* dst) {
#if defined(__SSE2__)
  const __m128 half = _mm_set1_ps(0.5f);
  for (int x = 0; x < width; ++x) {
    const __m128i v = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(sum + x * 4), half));
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(v, v), v);
    const int32_t pixel = _mm_cvtsi128_si32(bytes);
    std::memcpy(dst + static_cast<size_t>(x) * 3, &pixel, x + 1 < width ? 4 : 3);
  }
#else
  for (int x = 0; x < width; ++x) {
    for (int c = 0; c < 3; ++c) dst[x * 3 + c] = static_cast<uint8_t>(std::clamp(sum[x * 4 + c] + 0.5f, 0.f, 255.f));
  }
#endif
}

}  // namespace

Pixels resample_for_model(const uint8_t* pixels, int src_w, int src_h, int bands, int width, int height) {
  const AxisFilter fx = axis_filter(src_w, width), fy = axis_filter(src_h, height);
#if defined(__AVX2__)
  const std::vector<float> paired = paired_weights(fx);
#else
  const std::vector<float> paired;
#endif
  Pixels out;
  out.width = width;
  out.height = height;
  out.bands = 3;
  out.data.resize(static_cast<size_t>(width) * height * 3);
  const size_t src_stride = static_cast<size_t>(src_w) * bands;
  // A band of output rows per free core. Each keeps the horizontal pass of the last fy.taps source
  // rows in a ring (each source row serves several output rows); at a band's start the rows
  // before it are computed again (a few rows in a thousand).
  parallel_bands(height, [&](int y0, int y1) {
    const int ring = fy.taps;
    Buffer<Pixel4> rows(static_cast<size_t>(ring) * width), expanded(src_w);
    std::vector<int> held(ring, -1);
    std::vector<const float*> window(ring);
    Buffer<float> sum(static_cast<size_t>(width) * 4);
    for (int y = y0; y < y1; ++y) {
      const int first = fy.first[y];
      for (int k = 0; k < fy.taps; ++k) {
        const int r = first + k, slot = r % ring;
        Pixel4* row = rows.data() + static_cast<size_t>(slot) * width;
        window[k] = reinterpret_cast<const float*>(row);
        if (held[slot] == r) continue;
        held[slot] = r;
        expand_row(pixels + r * src_stride, src_w, bands, expanded.data());
        horizontal(expanded.data(), fx, paired, width, row);
      }
      // The vertical pass, over the row's floats at once (the compiler vectorises these loops).
      const float* w = fy.weight.data() + static_cast<size_t>(y) * fy.taps;
      const size_t n = static_cast<size_t>(width) * 4;
      for (size_t i = 0; i < n; ++i) sum[i] = w[0] * window[0][i];
      for (int k = 1; k < fy.taps; ++k) {
        const float wk = w[k];
        const float* q = window[k];
        for (size_t i = 0; i < n; ++i) sum[i] += wk * q[i];
      }
      store_rgb(sum.data(), width, out.data.data() + static_cast<size_t>(y) * width * 3);
    }
  });
  return out;
}

}  // namespace bgone
