#include "compositor.h"

#include <algorithm>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "parallel.h"

namespace bgone {

Composer::Composer(const JobOptions& o, const Plane& alpha, const Buffer<uint8_t>& fg) : o_(o), alpha_(alpha), fg_(fg) {
  if (o.alpha_only) {
    bands_ = 1;
    return;
  }
  // Background: bg_color, else white for JPEG (no alpha channel), else transparent.
  has_bg_ = o.has_background || o.format == OutputFormat::Jpeg;
  if (o.has_background) {
    for (int c = 0; c < 3; ++c) bg_[c] = o.background[c] / 255.f;
    bg_a_ = o.background[3] / 255.f;
  }
  keep_alpha_ = o.format != OutputFormat::Jpeg && (!has_bg_ || bg_a_ < 1.f);
  bands_ = keep_alpha_ ? 4 : 3;
}

void Composer::row(int y, uint8_t* out) const {
  const float* alpha = alpha_.row(y);
  const int w = alpha_.width;
  if (o_.alpha_only) {
    for (int x = 0; x < w; ++x) out[x] = unit_to_byte(alpha[x]);
    return;
  }
  const uint8_t* fg = fg_.data() + static_cast<size_t>(y) * w * 3;
  if (!has_bg_) {
    transparent_row(alpha, fg, w, out);
    return;
  }
  for (int x = 0; x < w; ++x) {
    const uint8_t a8 = unit_to_byte(alpha[x]);
    const float a = a8 / 255.f;
    uint8_t* px = out + static_cast<size_t>(x) * bands_;
    const uint8_t* f = fg + static_cast<size_t>(x) * 3;
    const float under = bg_a_ * (1.f - a);  // "over" compositing of the subject on the background
    float out_a = a + under;
    float rgb[3];
    for (int c = 0; c < 3; ++c) rgb[c] = out_a > 0 ? (f[c] / 255.f * a + bg_[c] * under) / out_a : 0.f;
    if (!keep_alpha_ && out_a < 1.f) {  // JPEG with a translucent bg_color: flatten on white
      for (int c = 0; c < 3; ++c) rgb[c] = rgb[c] * out_a + (1.f - out_a);
      out_a = 1.f;
    }
    for (int c = 0; c < 3; ++c) px[c] = unit_to_byte(rgb[c]);
    if (keep_alpha_) px[3] = unit_to_byte(out_a);
  }
}

// RGBA on no background: the colours where alpha is not 0 (fully transparent pixels carry none,
// so nothing of the background leaks and PNGs shrink). In two loops per stretch, the first
// vectorised: the default output's composition, once a scalar loop with a branch per channel.
void Composer::transparent_row(const float* alpha, const uint8_t* fg, int w, uint8_t* out) {
  constexpr int kStretch = 256;
  uint8_t a8[kStretch];
  for (int x0 = 0; x0 < w; x0 += kStretch) {
    const int n = std::min(kStretch, w - x0);
    for (int i = 0; i < n; ++i) a8[i] = unit_to_byte(alpha[x0 + i]);
    int i = 0;
#if defined(__AVX2__)
    // Four pixels a step (the AVX2 build): three bytes each spread into four, alpha into the
    // fourth, colour cleared where alpha is 0; the same bytes as the loop below. A 16-byte load
    // reads two pixels past the four, so the last pixels of a stretch are left to that loop.
    const __m128i spread = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    const __m128i to_top = _mm_setr_epi8(-1, -1, -1, 0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3);
    for (; i + 6 <= n; i += 4) {
      const __m128i colour =
          _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(fg + static_cast<size_t>(x0 + i) * 3)), spread);
      int four;
      std::memcpy(&four, a8 + i, 4);
      const __m128i a = _mm_shuffle_epi8(_mm_cvtsi32_si128(four), to_top);
      const __m128i clear = _mm_cmpeq_epi32(a, _mm_setzero_si128());
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + static_cast<size_t>(x0 + i) * 4), _mm_or_si128(_mm_andnot_si128(clear, colour), a));
    }
#endif
    for (; i < n; ++i) {
      const uint8_t* f = fg + static_cast<size_t>(x0 + i) * 3;
      const uint32_t colour = f[0] | static_cast<uint32_t>(f[1]) << 8 | static_cast<uint32_t>(f[2]) << 16;
      const uint32_t pixel = (a8[i] != 0 ? colour : 0u) | static_cast<uint32_t>(a8[i]) << 24;
      std::memcpy(out + static_cast<size_t>(x0 + i) * 4, &pixel, 4);
    }
  }
}

Pixels Composer::whole() const {
  Pixels out;
  out.width = width();
  out.height = height();
  out.bands = bands_;
  out.data.resize(static_cast<size_t>(out.width) * out.height * out.bands);
  const size_t stride = static_cast<size_t>(out.width) * out.bands;
  parallel_rows(out.height, [&](int first, int end) {
    for (int y = first; y < end; ++y) row(y, out.data.data() + y * stride);
  });
  return out;
}

}  // namespace bgone
