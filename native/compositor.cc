#include "compositor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "parallel.h"

namespace bgone {

namespace {
const uint8_t kNoColour[3] = {0, 0, 0};  // outside the alpha plane
}  // namespace

Composer::Composer(const JobOptions& o, OutputFormat format, const Plane& alpha, const Buffer<uint8_t>& fg, const Placement& at,
                   const Pixels* background, const ShadowLayer* shadow, Composed part, const OutlineLayer* outline)
    : o_(o), alpha_(alpha), fg_(fg), at_(at), bg_image_(background), shadow_(shadow), outline_(outline) {
  if (o.alpha_only || part == Composed::ZipAlpha) {
    bg_image_ = nullptr;
    if (o.alpha_only) {  // a mask is the subject's alone
      shadow_ = nullptr;
      outline_ = nullptr;
    }
    if (part == Composed::ZipAlpha) {
      mode_ = o.alpha_only ? Mode::Opaque : Mode::ZipAlpha;
    } else {
      mode_ = o.zip ? Mode::MaskAsColour : Mode::Mask;
    }
    bands_ = mode_ == Mode::MaskAsColour ? 3 : 1;
    return;
  }
  if (o.zip && bg_image_ == nullptr && !o.has_background) {
    mode_ = Mode::Colours;
    keep_alpha_ = false;
    bands_ = 3;
    return;
  }
  // Background: the image, else bg_color, else white for JPEG (no alpha channel), else transparent.
  const bool has_bg = bg_image_ != nullptr || o.has_background || format == OutputFormat::Jpeg;
  mode_ = has_bg ? Mode::OnBackground : Mode::Transparent;
  if (bg_image_ == nullptr && o.has_background) {
    for (int c = 0; c < 3; ++c) bg_[c] = o.background[c] / 255.f;
    bg_a_ = o.background[3] / 255.f;
  }
  const bool bg_opaque = bg_image_ != nullptr ? bg_image_->bands == 3 : bg_a_ >= 1.f;
  keep_alpha_ = format != OutputFormat::Jpeg && (!has_bg || !bg_opaque);
  bands_ = keep_alpha_ ? 4 : 3;
}

bool Composer::covers_canvas() const { return at_.x == 0 && at_.y == 0 && alpha_.width == at_.canvas_w && alpha_.height == at_.canvas_h; }

bool Composer::translucent() const {
  if (o_.alpha_only) return true;
  const bool any_bg = bg_image_ != nullptr || o_.has_background;
  if (bg_image_ != nullptr ? bg_image_->bands == 3 : any_bg && o_.background[3] == 255) return false;
  // The background, where there is one, is translucent somewhere (or there is none): where the
  // subject does not cover it (alpha below 1), so is the output.
  if (bg_image_ == nullptr && !covers_canvas()) return true;
  std::atomic<bool> found{false};
  const int W = at_.canvas_w;
  parallel_rows(at_.canvas_h, [&](int first, int end) {
    for (int y = first; y < end && !found.load(std::memory_order_relaxed); ++y) {
      const int ay = y - at_.y;
      const float* alpha = ay >= 0 && ay < alpha_.height ? alpha_.row(ay) : nullptr;
      const uint8_t* bg = bg_image_ != nullptr ? bg_image_->data.data() + static_cast<size_t>(y) * W * 4 : nullptr;
      for (int x = 0; x < W; ++x) {
        const int ax = x - at_.x;
        const float a = alpha != nullptr && ax >= 0 && ax < alpha_.width ? unit_to_byte(alpha[ax]) / 255.f : 0.f;
        const float under = (bg != nullptr ? bg[x * 4 + 3] / 255.f : bg_a_) * (1.f - a);
        if (unit_to_byte(bg != nullptr || any_bg ? a + under : a) < 255) {
          found.store(true, std::memory_order_relaxed);
          return;
        }
      }
    }
  });
  return found.load();
}

void Composer::row(int y, uint8_t* out) const {
  const int W = at_.canvas_w, w = alpha_.width, ay = y - at_.y;
  const bool inside = ay >= 0 && ay < alpha_.height;
  const float* alpha = inside ? alpha_.row(ay) : nullptr;
  // Outside the alpha plane's columns (or on a row outside it) alpha is 0: the columns before and
  // after it.
  const int x0 = inside ? at_.x : W, x1 = inside ? at_.x + w : W;
  if (mode_ == Mode::Opaque) {
    std::memset(out, 255, W);
    return;
  }
  if (mode_ == Mode::Mask || (mode_ == Mode::ZipAlpha && shadow_ == nullptr && outline_ == nullptr)) {
    std::memset(out, 0, x0);
    for (int x = x0; x < x1; ++x) out[x] = unit_to_byte(alpha[x - x0]);
    std::memset(out + x1, 0, W - x1);
    return;
  }
  if (mode_ == Mode::MaskAsColour) {
    std::memset(out, 0, static_cast<size_t>(W) * 3);
    for (int x = x0; x < x1; ++x) std::memset(out + static_cast<size_t>(x) * 3, unit_to_byte(alpha[x - x0]), 3);
    return;
  }
  const uint8_t* fg = inside ? fg_.data() + static_cast<size_t>(ay) * w * 3 : nullptr;
  if (outline_ != nullptr) {
    outlined_row(y, alpha, fg, x0, x1, out);
    return;
  }
  // The shadow's alpha along the row, where there is one.
  thread_local std::vector<float> shade;
  const float* shadow = nullptr;
  if (shadow_ != nullptr) {
    shade.resize(W);
    shadow_->row(y, shade.data());
    shadow = shade.data();
    if (mode_ != Mode::OnBackground) {
      shadowed_row(alpha, fg, x0, x1, shadow, out);
      return;
    }
  }
  if (mode_ == Mode::Colours) {
    std::memset(out, 0, static_cast<size_t>(x0) * 3);
    if (inside) std::memcpy(out + static_cast<size_t>(x0) * 3, fg, static_cast<size_t>(w) * 3);
    std::memset(out + static_cast<size_t>(x1) * 3, 0, static_cast<size_t>(W - x1) * 3);
    return;
  }
  if (mode_ == Mode::Transparent) {
    std::memset(out, 0, static_cast<size_t>(x0) * 4);
    if (inside) transparent_row(alpha, fg, w, out + static_cast<size_t>(x0) * 4);
    std::memset(out + static_cast<size_t>(x1) * 4, 0, static_cast<size_t>(W - x1) * 4);
    return;
  }
  const uint8_t* bg_row = bg_image_ != nullptr ? bg_image_->data.data() + static_cast<size_t>(y) * W * bg_image_->bands : nullptr;
  const int bg_bands = bg_image_ != nullptr ? bg_image_->bands : 0;
  for (int x = 0; x < W; ++x) {
    const bool in = x >= x0 && x < x1;
    const uint8_t a8 = in ? unit_to_byte(alpha[x - x0]) : 0;
    const float a = a8 / 255.f;
    uint8_t* px = out + static_cast<size_t>(x) * bands_;
    const uint8_t* f = in ? fg + static_cast<size_t>(x - x0) * 3 : kNoColour;
    float bg[3] = {bg_[0], bg_[1], bg_[2]}, bg_a = bg_a_;
    if (bg_row != nullptr) {
      const uint8_t* b = bg_row + static_cast<size_t>(x) * bg_bands;
      for (int c = 0; c < 3; ++c) bg[c] = b[c] / 255.f;
      bg_a = bg_bands == 4 ? b[3] / 255.f : 1.f;
    }
    // "Over" compositing of the subject on the shadow on the background; the shadow, black, adds
    // its alpha and takes its share of the background's colour (nothing without a shadow: the
    // same floats as the subject on the background alone).
    const float s = shadow != nullptr ? shadow[x] : 0.f;
    const float under = bg_a * (1.f - s) * (1.f - a);
    float out_a = a + (1.f - a) * s + under;
    float rgb[3];
    for (int c = 0; c < 3; ++c) rgb[c] = out_a > 0 ? (f[c] / 255.f * a + bg[c] * under) / out_a : 0.f;
    if (!keep_alpha_ && out_a < 1.f) {  // JPEG with a translucent background: flatten on white
      for (int c = 0; c < 3; ++c) rgb[c] = rgb[c] * out_a + (1.f - out_a);
      out_a = 1.f;
    }
    for (int c = 0; c < 3; ++c) px[c] = unit_to_byte(rgb[c]);
    if (keep_alpha_) px[3] = unit_to_byte(out_a);
  }
}

// The subject over its black shadow, alone: the alpha is the subject's and the shadow's, the colour
// the subject's share of it. Where nothing shows (alpha 0) a transparent pixel carries no colour,
// and zip's colours are those of the output without a shadow.
void Composer::shadowed_row(const float* alpha, const uint8_t* fg, int x0, int x1, const float* shadow, uint8_t* out) const {
  for (int x = 0; x < at_.canvas_w; ++x) {
    const bool in = x >= x0 && x < x1;
    const float a = (in ? unit_to_byte(alpha[x - x0]) : 0) / 255.f;
    const float out_a = a + (1.f - a) * shadow[x];
    const uint8_t a8 = unit_to_byte(out_a);
    if (mode_ == Mode::ZipAlpha) {
      out[x] = a8;
      continue;
    }
    uint8_t* px = out + static_cast<size_t>(x) * bands_;
    const uint8_t* f = in ? fg + static_cast<size_t>(x - x0) * 3 : kNoColour;
    const float share = a8 == 0 ? (mode_ == Mode::Colours ? 1.f : 0.f) : a / out_a;
    for (int c = 0; c < 3; ++c) px[c] = unit_to_byte(f[c] / 255.f * share);
    if (mode_ == Mode::Transparent) px[3] = a8;
  }
}

void Composer::outlined_row(int y, const float* alpha, const uint8_t* fg, int x0, int x1, uint8_t* out) const {
  const int W = at_.canvas_w;
  thread_local std::vector<float> edge, shade;
  edge.resize(W);
  outline_->row(y, edge.data());
  const float* shadow = nullptr;
  if (shadow_ != nullptr) {
    shade.resize(W);
    shadow_->row(y, shade.data());
    shadow = shade.data();
  }
  const float* oc = outline_->colour();
  const bool on_bg = mode_ == Mode::OnBackground;
  const uint8_t* bg_row = on_bg && bg_image_ != nullptr ? bg_image_->data.data() + static_cast<size_t>(y) * W * bg_image_->bands : nullptr;
  const int bg_bands = bg_image_ != nullptr ? bg_image_->bands : 0;
  for (int x = 0; x < W; ++x) {
    const bool in = x >= x0 && x < x1;
    const float a = (in ? unit_to_byte(alpha[x - x0]) : 0) / 255.f;
    const uint8_t* f = in ? fg + static_cast<size_t>(x - x0) * 3 : kNoColour;
    float bg[3] = {bg_[0], bg_[1], bg_[2]}, bg_a = on_bg ? bg_a_ : 0.f;
    if (bg_row != nullptr) {
      const uint8_t* b = bg_row + static_cast<size_t>(x) * bg_bands;
      for (int c = 0; c < 3; ++c) bg[c] = b[c] / 255.f;
      bg_a = bg_bands == 4 ? b[3] / 255.f : 1.f;
    }
    // "Over", layer by layer: the subject, the outline (its colour), the shadow (black), the
    // background; each takes its share of what the layers above leave.
    const float o = edge[x], s = shadow != nullptr ? shadow[x] : 0.f;
    const float w_outline = (1.f - a) * o, w_shadow = (1.f - a) * (1.f - o) * s;
    const float under = bg_a * (1.f - a) * (1.f - o) * (1.f - s);
    float out_a = a + w_outline + w_shadow + under;
    if (mode_ == Mode::ZipAlpha) {
      out[x] = unit_to_byte(out_a);
      continue;
    }
    uint8_t* px = out + static_cast<size_t>(x) * bands_;
    float rgb[3];
    for (int c = 0; c < 3; ++c) rgb[c] = out_a > 0 ? (f[c] / 255.f * a + oc[c] * w_outline + bg[c] * under) / out_a : 0.f;
    if (mode_ == Mode::Colours && unit_to_byte(out_a) == 0) {  // nothing shows: zip's colours as they are
      for (int c = 0; c < 3; ++c) rgb[c] = f[c] / 255.f;
    }
    if (on_bg && !keep_alpha_ && out_a < 1.f) {  // JPEG with a translucent background: flatten on white
      for (int c = 0; c < 3; ++c) rgb[c] = rgb[c] * out_a + (1.f - out_a);
      out_a = 1.f;
    }
    for (int c = 0; c < 3; ++c) px[c] = unit_to_byte(rgb[c]);
    if (mode_ == Mode::Transparent && unit_to_byte(out_a) == 0) px[0] = px[1] = px[2] = 0;
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
