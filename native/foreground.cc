#include "foreground.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "box_mean.h"

namespace bgone {

namespace {

// Blur fusion runs at full resolution up to kForegroundFullPixels, above that at an integer
// fraction of the resolution of no more than kForegroundWorkPixels. The blurs' radii scale with the
// working resolution, so the estimate is the same blur in image pixels on a coarser grid: at 2 MP
// the coarser grid moves band colours by under a level on average, for a third of the CPU.
constexpr double kForegroundFullPixels = 1e6;
constexpr double kForegroundWorkPixels = 0.4e6;

// Columns [x0, x1) of rows [y0, y1).
struct Box {
  int x0, y0, x1, y1;
  bool empty() const { return x1 <= x0 || y1 <= y0; }
  // This box with `by` more on every side, within a w x h image.
  Box grown(int by, int w, int h) const { return {std::max(0, x0 - by), std::max(0, y0 - by), std::min(w, x1 + by), std::min(h, y1 + by)}; }
};

// Semi-transparent: the pixels whose colour the foreground estimate changes.
inline bool in_band(float a) { return a > 0.f && a < 1.f; }

// Whether any of the n values from a is in the band, 4 at a time with SSE2 (both builds), with no
// early exit. Written with intrinsics: GCC 12 compiled the plain loop (even with & for &&) to a
// scalar compare per value, which was about half of add_row's time at 12 MP. The compares are
// ordered, as in_band's are: a NaN is not in the band.
inline bool any_in_band(const float* a, int n) {
  int i = 0;
  bool any = false;
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps(), one = _mm_set1_ps(1.f);
  __m128 found = zero;
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(a + i);
    found = _mm_or_ps(found, _mm_and_ps(_mm_cmpgt_ps(v, zero), _mm_cmplt_ps(v, one)));
  }
  any = _mm_movemask_ps(found) != 0;
#endif
  for (; i < n; ++i) any |= in_band(a[i]);
  return any;
}

// Values are tested this many at a time where most are 0 or 1.
constexpr int kBandChunk = 16;

// Alpha-weighted local means of F and B (the "blurred estimates" of blur fusion) inside `box`: the
// box means of alpha, F * alpha and B * (1 - alpha), streamed together (seven channels), divided
// row by row. Outside the box f_hat and b_hat are left as they were.
void weighted_means(const Buffer<float>& fg, const Buffer<float>& bg, const Plane& alpha, int radius, Box box, Buffer<float>& f_hat,
                    Buffer<float>& b_hat) {
  const int w = alpha.width, h = alpha.height;
  auto weighted = [&](int y, int xa, int xb, float* row) {
    const size_t base = static_cast<size_t>(y) * w;
    for (int x = xa; x < xb; ++x) {
      const size_t i = base + x;
      const float a = alpha.v[i];
      float* o = row + static_cast<size_t>(x) * 7;
#if defined(__SSE2__)
      // Each colour's three channels at once, with the scalar loop's operations (below): F * alpha
      // into o[1..4] and B * (1 - alpha) into o[4..7], each store's fourth lane overwritten by the
      // next (o[7] is the next pixel's o[0], or stream_box_mean's padding), then alpha into o[0].
      const float b_weight = 1.f - a;
      _mm_storeu_ps(o + 1, _mm_mul_ps(_mm_loadu_ps(fg.data() + i * 3), _mm_set1_ps(a)));
      _mm_storeu_ps(o + 4, _mm_mul_ps(_mm_loadu_ps(bg.data() + i * 3), _mm_set1_ps(b_weight)));
      o[0] = a;
#else
      o[0] = a;
      for (int c = 0; c < 3; ++c) {
        o[1 + c] = fg[i * 3 + c] * a;
        o[4 + c] = bg[i * 3 + c] * (1.f - a);
      }
#endif
    }
  };
  auto divide = [&](int y, const float* m) {
    const size_t base = static_cast<size_t>(y) * w;
    for (int x = box.x0; x < box.x1; ++x) {
      const size_t i = base + x;
      const float* ch = m + static_cast<size_t>(x) * 7;
      const float wa = ch[0], wb = 1.f - ch[0];
#if defined(__SSE2__)
      // Three channels at once: the division is taken in every lane and kept where the weight is
      // above 1e-5 (the scalar loop's test), else the colour as it was. Exactly three floats are
      // stored per estimate: the fourth would be the next pixel's, which another thread may own.
      const __m128 keep_f = _mm_castsi128_ps(_mm_set1_epi32(wa > 1e-5f ? -1 : 0));
      const __m128 keep_b = _mm_castsi128_ps(_mm_set1_epi32(wb > 1e-5f ? -1 : 0));
      const __m128 f = _mm_or_ps(_mm_and_ps(keep_f, _mm_div_ps(_mm_loadu_ps(ch + 1), _mm_set1_ps(wa))),
                                 _mm_andnot_ps(keep_f, _mm_loadu_ps(fg.data() + i * 3)));
      const __m128 b = _mm_or_ps(_mm_and_ps(keep_b, _mm_div_ps(_mm_loadu_ps(ch + 4), _mm_set1_ps(wb))),
                                 _mm_andnot_ps(keep_b, _mm_loadu_ps(bg.data() + i * 3)));
      _mm_storel_pi(reinterpret_cast<__m64*>(f_hat.data() + i * 3), f);
      _mm_store_ss(f_hat.data() + i * 3 + 2, _mm_movehl_ps(f, f));
      _mm_storel_pi(reinterpret_cast<__m64*>(b_hat.data() + i * 3), b);
      _mm_store_ss(b_hat.data() + i * 3 + 2, _mm_movehl_ps(b, b));
#else
      for (int c = 0; c < 3; ++c) {
        f_hat[i * 3 + c] = wa > 1e-5f ? ch[1 + c] / wa : fg[i * 3 + c];
        b_hat[i * 3 + c] = wb > 1e-5f ? ch[4 + c] / wb : bg[i * 3 + c];
      }
#endif
    }
  };
  parallel_bands(box.y1 - box.y0,
                 [&](int b0, int b1) { stream_box_mean<7>(w, h, radius, box.y0 + b0, box.y0 + b1, box.x0, box.x1, weighted, divide); });
}

}  // namespace

// The blurred estimates are smooth, so they are computed on a grid `factor` times coarser (each cell
// the mean of factor x factor pixels, the last row and column of cells over what is left) and
// sampled bilinearly; the final correction uses the full-resolution colour and alpha.
ForegroundInputs::ForegroundInputs(int width, int height) : width_(width), height_(height), first_x_(height, width), end_x_(height, 0) {
  const double n = static_cast<double>(width) * height;
  factor_ = n <= kForegroundFullPixels ? 1 : std::max(1, static_cast<int>(std::ceil(std::sqrt(n / kForegroundWorkPixels))));
  const int sw = (width + factor_ - 1) / factor_, sh = (height + factor_ - 1) / factor_;
  alpha_ = Plane(sw, sh, Unfilled{});
  // One float more than the colours: weighted_means reads a pixel's three as four.
  image_.resize(static_cast<size_t>(sw) * sh * 3 + 1);
  image_.back() = 0.f;
}

void ForegroundInputs::add_row(int y, const uint8_t* px, const float* a) {
  const int w = width_, f = factor_;
  int x = 0;
  while (x + kBandChunk <= w && !any_in_band(a + x, kBandChunk)) x += kBandChunk;
  while (x < w && !in_band(a[x])) ++x;
  if (x < w) {
    int e = w;
    while (e - kBandChunk > x && !any_in_band(a + e - kBandChunk, kBandChunk)) e -= kBandChunk;
    while (!in_band(a[e - 1])) --e;
    first_x_[y] = x;
    end_x_[y] = e;
  }
  // A cell row's sums build up per column as its rows come (a group's rows, in order, on one
  // thread): two loops over the row without branches, which the compiler vectorises. The columns
  // are summed into cells once, after the group's last row. Colours are whole numbers (at most 255 f
  // per column: exact in 16 bits while f <= 257, and f is 10 for 6000 x 6000), alpha is summed down
  // each column and then across the cell's.
  // Summing each cell row by row ran scalar: 1.6 ns a pixel.
  thread_local std::vector<uint16_t> colour_columns;
  thread_local std::vector<float> alpha_columns;
  if (y % f == 0) {
    colour_columns.assign(static_cast<size_t>(w) * 3, 0);
    alpha_columns.assign(w, 0.f);
  }
  uint16_t* cc = colour_columns.data();
  float* ac = alpha_columns.data();
  for (int i = 0; i < w * 3; ++i) cc[i] = static_cast<uint16_t>(cc[i] + px[i]);
  for (int i = 0; i < w; ++i) ac[i] += a[i];
  const int sy = y / f, y_end = std::min(height_, (sy + 1) * f);
  if (y + 1 < y_end) return;
  const int sw = alpha_.width, rows = y_end - sy * f;
  float* colour = image_.data() + static_cast<size_t>(sy) * sw * 3;
  float* alpha_mean = alpha_.row(sy);
  for (int sx = 0; sx < sw; ++sx) {
    const int x0 = sx * f, x1 = std::min(w, x0 + f);
    uint32_t r = 0, g = 0, b = 0;
    float as = 0.f;
    for (int x = x0; x < x1; ++x) {
      r += cc[x * 3];
      g += cc[x * 3 + 1];
      b += cc[x * 3 + 2];
      as += ac[x];
    }
    const float count = static_cast<float>(rows * (x1 - x0));
    colour[sx * 3] = static_cast<float>(r) / (count * 255.f);
    colour[sx * 3 + 1] = static_cast<float>(g) / (count * 255.f);
    colour[sx * 3 + 2] = static_cast<float>(b) / (count * 255.f);
    alpha_mean[sx] = as / count;
  }
}

void estimate_foreground(Buffer<uint8_t>& rgb, const Plane& alpha, ForegroundInputs& inputs) {
  const int w = alpha.width, h = alpha.height;
  // Only semi-transparent pixels get a new colour: the blurs below are needed only around their
  // box, and with none, not at all.
  Box band{w, h, 0, 0};
  for (int y = 0; y < h; ++y) {
    if (inputs.first_x_[y] >= inputs.end_x_[y]) continue;
    band.x0 = std::min(band.x0, inputs.first_x_[y]);
    band.x1 = std::max(band.x1, inputs.end_x_[y]);
    band.y0 = std::min(band.y0, y);
    band.y1 = y + 1;
  }
  if (band.empty()) return;
  const int factor = inputs.factor_;
  const Buffer<float>& image = inputs.image_;
  const Plane& work_alpha = inputs.alpha_;
  const size_t wn = work_alpha.v.size();
  const int sw = work_alpha.width, sh = work_alpha.height;
  // Radii from the paper (90 then 6 px) are for images of about 1 MP; scale them with the image.
  const double scale = std::sqrt(static_cast<double>(wn) / 1e6);
  const int large = std::max(3, static_cast<int>(std::lround(90 * scale)));
  const int small = std::max(1, static_cast<int>(std::lround(6 * scale)));
  // Where a full-resolution position samples the working grid (and the next sample after it).
  auto work_at = [factor](int v, int work_n) { return std::clamp((v + 0.5f) / factor - 0.5f, 0.f, static_cast<float>(work_n - 1)); };
  // The estimates the correction samples: the bilinear neighbours of the band's box. The second
  // step's blur reads the first step's within `small` of them.
  const Box second{static_cast<int>(work_at(band.x0, sw)), static_cast<int>(work_at(band.y0, sh)),
                   std::min(sw, static_cast<int>(work_at(band.x1 - 1, sw)) + 2),
                   std::min(sh, static_cast<int>(work_at(band.y1 - 1, sh)) + 2)};
  const Box first = second.grown(small, sw, sh);
  // Each buffer has one float more than its pixels' colours: weighted_means and the correction
  // below read a pixel's three as four (the fourth unused).
  Buffer<float> fg(wn * 3 + 1), bg(wn * 3 + 1), f_hat(wn * 3 + 1), b_hat(wn * 3 + 1);
  fg[wn * 3] = bg[wn * 3] = f_hat[wn * 3] = b_hat[wn * 3] = 0.f;
  weighted_means(image, image, work_alpha, large, first, f_hat, b_hat);
  parallel_rows(first.y1 - first.y0, [&](int b0, int b1) {  // first blur-fusion step, at working resolution
    for (int y = first.y0 + b0; y < first.y0 + b1; ++y) {
      for (size_t i = static_cast<size_t>(y) * sw + first.x0; i < static_cast<size_t>(y) * sw + first.x1; ++i) {
        const float a = work_alpha.v[i];
        for (int c = 0; c < 3; ++c) {
          const float residual = image[i * 3 + c] - a * f_hat[i * 3 + c] - (1.f - a) * b_hat[i * 3 + c];
          fg[i * 3 + c] = std::clamp(f_hat[i * 3 + c] + a * residual, 0.f, 1.f);
          bg[i * 3 + c] = std::clamp(b_hat[i * 3 + c] + (1.f - a) * residual, 0.f, 1.f);
        }
      }
    }
  });
  weighted_means(fg, bg, work_alpha, small, second, f_hat, b_hat);  // second step's estimates
  // Each pixel reads only its own colour before writing it: the correction runs in place, by rows.
  // Where each column samples the grid, and each byte as a colour in 0..1, are worked out once (the
  // same arithmetic as per pixel: a division each), and stretches with no band pixel are passed over
  // kBandChunk at a time.
  std::vector<Lerp> columns(band.x1 - band.x0);
  for (int x = band.x0; x < band.x1; ++x) {
    const float fx = work_at(x, sw);
    const int x0 = static_cast<int>(fx);
    columns[x - band.x0] = {x0, std::min(x0 + 1, sw - 1), fx - x0};
  }
  float unit[256];
  for (int v = 0; v < 256; ++v) unit[v] = v / 255.f;
  parallel_rows(band.y1 - band.y0, [&](int b0, int b1) {
    for (int y = band.y0 + b0; y < band.y0 + b1; ++y) {
      const float fy = work_at(y, sh);
      const int y0 = static_cast<int>(fy), y1 = std::min(y0 + 1, sh - 1);
      const float ty = fy - y0;
      const float* alpha_row = alpha.row(y);
      uint8_t* px = rgb.data() + static_cast<size_t>(y) * w * 3;
      // Only this row's own stretch from its first band pixel to its last (add_row found them).
      const int row_x1 = inputs.end_x_[y];
      for (int x = inputs.first_x_[y]; x < row_x1;) {
        if (x + kBandChunk <= row_x1 && !any_in_band(alpha_row + x, kBandChunk)) {
          x += kBandChunk;
          continue;
        }
        for (const int end = std::min(row_x1, x + kBandChunk); x < end; ++x) {
          const float a = alpha_row[x];
          if (!in_band(a)) continue;
          const Lerp& col = columns[x - band.x0];
          const size_t i00 = (static_cast<size_t>(y0) * sw + col.i0) * 3, i01 = (static_cast<size_t>(y0) * sw + col.i1) * 3;
          const size_t i10 = (static_cast<size_t>(y1) * sw + col.i0) * 3, i11 = (static_cast<size_t>(y1) * sw + col.i1) * 3;
#if defined(__SSE2__)
          // The three channels at once, with the scalar loop's operations (below, for other CPUs) in
          // its order and no FMA in either build, so the same bytes.
          const __m128 fx = _mm_set1_ps(col.f), fy = _mm_set1_ps(ty), va = _mm_set1_ps(a), vb = _mm_set1_ps(1.f - a);
          auto sample4 = [&](const Buffer<float>& p) {
            const __m128 p00 = _mm_loadu_ps(p.data() + i00), p01 = _mm_loadu_ps(p.data() + i01);
            const __m128 p10 = _mm_loadu_ps(p.data() + i10), p11 = _mm_loadu_ps(p.data() + i11);
            const __m128 top = _mm_add_ps(p00, _mm_mul_ps(_mm_sub_ps(p01, p00), fx));
            const __m128 bottom = _mm_add_ps(p10, _mm_mul_ps(_mm_sub_ps(p11, p10), fx));
            return _mm_add_ps(top, _mm_mul_ps(_mm_sub_ps(bottom, top), fy));
          };
          const __m128 f = sample4(f_hat), b = sample4(b_hat);
          uint8_t* out = px + static_cast<size_t>(x) * 3;
          const __m128 colour = _mm_setr_ps(unit[out[0]], unit[out[1]], unit[out[2]], 0.f);
          const __m128 residual = _mm_sub_ps(_mm_sub_ps(colour, _mm_mul_ps(va, f)), _mm_mul_ps(vb, b));
          const __m128 v = _mm_min_ps(_mm_max_ps(_mm_add_ps(f, _mm_mul_ps(va, residual)), _mm_setzero_ps()), _mm_set1_ps(1.f));
          const __m128i ints = _mm_cvttps_epi32(_mm_add_ps(_mm_mul_ps(v, _mm_set1_ps(255.f)), _mm_set1_ps(0.5f)));
          const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(ints, ints), _mm_setzero_si128());
          const uint32_t packed = static_cast<uint32_t>(_mm_cvtsi128_si32(bytes));
          std::memcpy(out, &packed, 3);
#else
          for (int c = 0; c < 3; ++c) {
            auto sample = [&](const Buffer<float>& p) {
              const float top = p[i00 + c] + (p[i01 + c] - p[i00 + c]) * col.f;
              const float bottom = p[i10 + c] + (p[i11 + c] - p[i10 + c]) * col.f;
              return top + (bottom - top) * ty;
            };
            const float f = sample(f_hat), b = sample(b_hat);
            const float residual = unit[px[x * 3 + c]] - a * f - (1.f - a) * b;
            px[x * 3 + c] = unit_to_byte(f + a * residual);
          }
#endif
        }
      }
    }
  });
}

}  // namespace bgone
