#include "matting.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#if defined(__AVX2__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace bgone {

namespace {

struct Tap {
  int first = 0;               // first source index
  std::vector<float> weights;  // normalised
};

// Filter taps of a tent filter for every output index along one axis.
std::vector<Tap> axis_taps(int out_n, int src_n, AxisMap map) {
  std::vector<Tap> taps(out_n);
  const double support = std::max(1.0, map.scale);  // widen when shrinking (antialiasing)
  for (int o = 0; o < out_n; ++o) {
    const double centre = map.scale * o + map.offset;
    int lo = static_cast<int>(std::floor(centre - support)) + 1;
    int hi = static_cast<int>(std::ceil(centre + support)) - 1;
    if (hi < lo) hi = lo;
    Tap& tap = taps[o];
    double sum = 0;
    std::vector<double> w;
    for (int s = lo; s <= hi; ++s) {
      double weight = 1.0 - std::fabs(s - centre) / support;
      if (weight < 0) weight = 0;
      w.push_back(weight);
      sum += weight;
    }
    if (sum <= 0) {  // centre falls exactly between taps at the limit: nearest sample
      lo = hi = static_cast<int>(std::lround(centre));
      w.assign(1, 1.0);
      sum = 1;
    }
    // Clamp to the source: fold weights of out-of-range taps onto the edge sample.
    const int first = std::clamp(lo, 0, src_n - 1);
    const int last = std::clamp(hi, 0, src_n - 1);
    tap.first = first;
    tap.weights.assign(last - first + 1, 0.f);
    for (int s = lo; s <= hi; ++s) {
      const int c = std::clamp(s, 0, src_n - 1);
      tap.weights[c - first] += static_cast<float>(w[s - lo] / sum);
    }
  }
  return taps;
}

}  // namespace

Plane resample_plane(const Plane& src, int out_w, int out_h, AxisMap mx, AxisMap my) {
  const std::vector<Tap> tx = axis_taps(out_w, src.width, mx);
  const std::vector<Tap> ty = axis_taps(out_h, src.height, my);
  // Only the source rows some output row touches need the horizontal pass.
  int row_lo = src.height, row_hi = -1;
  for (const Tap& t : ty) {
    row_lo = std::min(row_lo, t.first);
    row_hi = std::max(row_hi, t.first + static_cast<int>(t.weights.size()) - 1);
  }
  Plane horizontal(out_w, row_hi - row_lo + 1, Unfilled{});
  for (int y = row_lo; y <= row_hi; ++y) {
    const float* in = src.row(y);
    float* out = horizontal.row(y - row_lo);
    for (int x = 0; x < out_w; ++x) {
      const Tap& t = tx[x];
      float acc = 0;
      const float* p = in + t.first;
      for (size_t k = 0; k < t.weights.size(); ++k) acc += p[k] * t.weights[k];
      out[x] = acc;
    }
  }
  Plane out(out_w, out_h);
  for (int y = 0; y < out_h; ++y) {
    const Tap& t = ty[y];
    float* o = out.row(y);
    for (size_t k = 0; k < t.weights.size(); ++k) {
      const float w = t.weights[k];
      const float* in = horizontal.row(t.first + static_cast<int>(k) - row_lo);
      for (int x = 0; x < out_w; ++x) o[x] += in[x] * w;
    }
  }
  return out;
}

namespace {

// The box mean over a (2r+1)^2 window, clipped at the borders (each position divides by its own
// count), of rows [y0, y1) and columns [x0, x1) of a C-channel image of w x h, channels
// interleaved. source(y, xa, xb, row) writes columns [xa, xb) of row y (C floats per column, at
// their own places in a row of w columns) when asked, in increasing y; sink(y, mean) gets row y's
// means, valid in columns [x0, x1). Rows are summed horizontally as they come into a ring of the
// 2r + 2 rows that the vertical running sums need, so no plane of products or partial sums is
// ever stored: for the guided filter (13 channels) that was 13 planes written and read twice. Sums
// are in double, as running sums must be; over the whole image the arithmetic is the same, step
// for step, as a separate pass per channel.
template <int C, class Source, class Sink>
void stream_box_mean(int w, int h, int r, int y0, int y1, int x0, int x1, Source&& source, Sink&& sink) {
  const int ring_rows = 2 * r + 2;
  const size_t row_size = static_cast<size_t>(w) * C;
  const int xa = std::max(0, x0 - r), xb = std::min(w, x1 + r);  // the columns the window reads
  Buffer<float> ring(row_size * ring_rows);
  // Four floats past each row: a source or sink may read or write a pixel's channels four at a
  // time (weighted_means), past the last pixel's.
  std::vector<float> src(row_size + 4), out(row_size + 4);
  std::vector<double> acc(row_size, 0.0), inv_x(w);
  for (int x = x0; x < x1; ++x) inv_x[x] = 1.0 / (std::min(w - 1, x + r) - std::max(0, x - r) + 1);
  auto slot = [&](int y) { return ring.data() + static_cast<size_t>(y % ring_rows) * row_size; };
  int next = std::max(0, y0 - r);  // the next row to sum horizontally
  auto ensure = [&](int y) {
    for (; next <= y; ++next) {
      source(next, xa, xb, src.data());
      float* dst = slot(next);
      double sum[C] = {};
      for (int x = xa; x <= std::min(x0 + r, w - 1); ++x) {
        for (int c = 0; c < C; ++c) sum[c] += src[static_cast<size_t>(x) * C + c];
      }
      for (int x = x0; x < x1; ++x) {
        float* d = dst + static_cast<size_t>(x) * C;
        for (int c = 0; c < C; ++c) d[c] = static_cast<float>(sum[c] * inv_x[x]);
        if (x + r + 1 < w) {
          const float* add = src.data() + static_cast<size_t>(x + r + 1) * C;
          for (int c = 0; c < C; ++c) sum[c] += add[c];
        }
        if (x - r >= 0) {
          const float* sub = src.data() + static_cast<size_t>(x - r) * C;
          for (int c = 0; c < C; ++c) sum[c] -= sub[c];
        }
      }
    }
  };
  const int first = std::max(0, y0 - r), last = std::min(h - 1, y0 + r);
  const size_t i0 = static_cast<size_t>(x0) * C, i1 = static_cast<size_t>(x1) * C;
  ensure(last);
  for (int y = first; y <= last; ++y) {
    const float* s = slot(y);
    for (size_t i = i0; i < i1; ++i) acc[i] += s[i];
  }
  for (int y = y0; y < y1; ++y) {
    const double inv = 1.0 / (std::min(h - 1, y + r) - std::max(0, y - r) + 1);
    for (size_t i = i0; i < i1; ++i) out[i] = static_cast<float>(acc[i] * inv);
    sink(y, out.data());
    if (y + r + 1 < h) {
      ensure(y + r + 1);
      const float* s = slot(y + r + 1);
      for (size_t i = i0; i < i1; ++i) acc[i] += s[i];
    }
    if (y - r >= 0) {
      const float* s = slot(y - r);
      for (size_t i = i0; i < i1; ++i) acc[i] -= s[i];
    }
  }
}

}  // namespace

GuidedCoefficients fit_guided_coarse(const uint8_t* rgb, const Plane& mask, int factor, int radius, double eps) {
  const int f = std::max(1, factor);
  const int fw = mask.width, w = std::max(1, mask.width / f), h = std::max(1, mask.height / f);
  const float share = 1.f / static_cast<float>(f * f);
  const int half = f * f / 2;
  // The guide and the mask averaged f x f (the guide rounded to 8 bits; a block past the last whole
  // one is dropped, a side shorter than f repeats its last sample), then the products whose local
  // means the filter needs: I (3), p, I*p (3), I*I^T (6 unique).
  auto products = [&](int y, int xa, int xb, float* row) {
    for (int x = xa; x < xb; ++x) {
      int sum[3] = {0, 0, 0};
      float p = 0;
      for (int dy = 0; dy < f; ++dy) {
        const size_t line = static_cast<size_t>(std::min(f * y + dy, mask.height - 1)) * fw;
        for (int dx = 0; dx < f; ++dx) {
          const size_t i = line + std::min(f * x + dx, fw - 1);
          for (int c = 0; c < 3; ++c) sum[c] += rgb[i * 3 + c];
          p += mask.v[i];
        }
      }
      p *= share;
      float I[3];
      for (int c = 0; c < 3; ++c) I[c] = static_cast<uint8_t>((sum[c] + half) / (f * f)) / 255.f;
      const float r = I[0], g = I[1], b = I[2];
      float* o = row + static_cast<size_t>(x) * 13;
      o[0] = r, o[1] = g, o[2] = b, o[3] = p;
      o[4] = r * p, o[5] = g * p, o[6] = b * p;
      o[7] = r * r, o[8] = r * g, o[9] = r * b, o[10] = g * g, o[11] = g * b, o[12] = b * b;
    }
  };
  // Each pixel's linear model from the local means: the guide's covariance plus eps on the
  // diagonal, inverted by cofactors (symmetric 3x3), times its covariance with the mask.
  Buffer<float> raw(static_cast<size_t>(w) * h * 4);
  auto solve = [&](int y, const float* m) {
    float* out = raw.data() + static_cast<size_t>(y) * w * 4;
    for (int x = 0; x < w; ++x) {
      const float* ch = m + static_cast<size_t>(x) * 13;
      const double mr = ch[0], mg = ch[1], mb = ch[2], mp = ch[3];
      const double cr = ch[4] - mr * mp, cg = ch[5] - mg * mp, cb = ch[6] - mb * mp;
      const double srr = ch[7] - mr * mr + eps, srg = ch[8] - mr * mg, srb = ch[9] - mr * mb;
      const double sgg = ch[10] - mg * mg + eps, sgb = ch[11] - mg * mb, sbb = ch[12] - mb * mb + eps;
      const double i00 = sgg * sbb - sgb * sgb, i01 = srb * sgb - srg * sbb, i02 = srg * sgb - srb * sgg;
      const double i11 = srr * sbb - srb * srb, i12 = srb * srg - srr * sgb, i22 = srr * sgg - srg * srg;
      const double det = srr * i00 + srg * i01 + srb * i02;
      const double inv = det != 0 ? 1.0 / det : 0.0;
      const double ar = (i00 * cr + i01 * cg + i02 * cb) * inv;
      const double ag = (i01 * cr + i11 * cg + i12 * cb) * inv;
      const double ab = (i02 * cr + i12 * cg + i22 * cb) * inv;
      float* o = out + static_cast<size_t>(x) * 4;
      o[0] = static_cast<float>(ar);
      o[1] = static_cast<float>(ag);
      o[2] = static_cast<float>(ab);
      o[3] = static_cast<float>(mp - ar * mr - ag * mg - ab * mb);
    }
  };
  parallel_bands(h, [&](int y0, int y1) { stream_box_mean<13>(w, h, radius, y0, y1, 0, w, products, solve); });
  // Then the coefficients' own local means: what is applied.
  GuidedCoefficients k;
  k.width = w;
  k.height = h;
  k.v.resize(raw.size());
  const size_t row_size = static_cast<size_t>(w) * 4;
  auto coefficients = [&](int y, int, int, float* row) { std::copy_n(raw.data() + y * row_size, row_size, row); };
  auto keep = [&](int y, const float* m) { std::copy_n(m, row_size, k.v.data() + y * row_size); };
  parallel_bands(h, [&](int y0, int y1) { stream_box_mean<4>(w, h, radius, y0, y1, 0, w, coefficients, keep); });
  return k;
}

namespace {

// Bilinear sample positions along one axis (upsampling: every output maps between two samples).
struct Lerp {
  int i0, i1;
  float f;
};
std::vector<Lerp> lerps(int out_n, int src_n, AxisMap map) {
  std::vector<Lerp> l(out_n);
  for (int o = 0; o < out_n; ++o) {
    const double pos = std::clamp(map.scale * o + map.offset, 0.0, static_cast<double>(src_n - 1));
    const int i0 = static_cast<int>(pos);
    l[o] = {i0, std::min(i0 + 1, src_n - 1), static_cast<float>(pos - i0)};
  }
  return l;
}

}  // namespace

Plane apply_guided(const GuidedCoefficients& k, const uint8_t* rgb, int out_w, int out_h, AxisMap mx, AxisMap my, FinishFlat flat,
                   const std::function<void(int, float*)>& finish, int row_group) {
  Plane q(out_w, out_h, Unfilled{});
  const int sw = k.width, sh = k.height;
  if (mx.scale > 1.0 || my.scale > 1.0) {
    // Shrinking: antialiased resampling of each coefficient plane (the output is small here).
    Plane planes[4];
    for (int c = 0; c < 4; ++c) {
      Plane plane(sw, sh, Unfilled{});
      for (size_t i = 0; i < plane.v.size(); ++i) plane.v[i] = k.v[i * 4 + c];
      planes[c] = resample_plane(plane, out_w, out_h, mx, my);
    }
    const Plane &ar = planes[0], &ag = planes[1], &ab = planes[2], &b = planes[3];
    for (size_t i = 0; i < q.v.size(); ++i) {
      const float v = b.v[i] + (ar.v[i] * rgb[i * 3] + ag.v[i] * rgb[i * 3 + 1] + ab.v[i] * rgb[i * 3 + 2]) * (1.f / 255.f);
      q.v[i] = std::clamp(v, 0.f, 1.f);
    }
    for (int y = 0; y < out_h; ++y) finish(y, q.row(y));
    return q;
  }
  // Enlarging (the common case for photos): bilinear, fused, without full-size coefficient planes:
  // each output row interpolates the coefficients' rows vertically once, then horizontally per pixel.
  const std::vector<Lerp> lx = lerps(out_w, sw, mx), ly = lerps(out_h, sh, my);
  // Per cell of the grid (grid points i, i + 1 and j, j + 1, the last ones repeated at the edges):
  // 0 or 1 where finish makes that of every alpha in the cell whatever the colours, else -1 (each
  // pixel computed). The bounds of a . rgb + b over every colour (rgb in 0..1) are taken per grid
  // point; interpolated coefficients are a weighted mean of a cell's four points, and the lower
  // bound is concave, the upper convex, in them, so the four points' extremes bound the cell.
  std::vector<float> lowest(static_cast<size_t>(sw) * sh), highest(lowest.size());
  for (size_t i = 0; i < lowest.size(); ++i) {
    const float* c = k.v.data() + i * 4;
    lowest[i] = c[3] + std::min(c[0], 0.f) + std::min(c[1], 0.f) + std::min(c[2], 0.f);
    highest[i] = c[3] + std::max(c[0], 0.f) + std::max(c[1], 0.f) + std::max(c[2], 0.f);
  }
  // A margin far above float rounding keeps a cell next to the flat ends computed pixel by pixel.
  constexpr float kMargin = 1e-4f;
  const float zero_below = flat.zero_up_to - kMargin, one_above = flat.one_from + kMargin;
  std::vector<int8_t> cell_flat(lowest.size());
  for (int j = 0; j < sh; ++j) {
    const size_t r0 = static_cast<size_t>(j) * sw, r1 = static_cast<size_t>(std::min(j + 1, sh - 1)) * sw;
    for (int i = 0; i < sw; ++i) {
      const int i1 = std::min(i + 1, sw - 1);
      const float hi = std::max(std::max(highest[r0 + i], highest[r0 + i1]), std::max(highest[r1 + i], highest[r1 + i1]));
      const float lo = std::min(std::min(lowest[r0 + i], lowest[r0 + i1]), std::min(lowest[r1 + i], lowest[r1 + i1]));
      cell_flat[r0 + i] = hi < zero_below ? 0 : lo > one_above ? 1 : -1;
    }
  }
  // The output columns of each cell, as runs (lerps pairs every column's i0 with min(i0 + 1, last)).
  struct Run {
    int x0, x1, cell;
  };
  std::vector<Run> runs;
  for (int x = 0; x < out_w; ++x) {
    if (runs.empty() || runs.back().cell != lx[x].i0) runs.push_back({x, x, lx[x].i0});
    runs.back().x1 = x + 1;
  }
#if defined(__AVX2__)
  std::vector<float> fractions(out_w);  // lx's weights, contiguous for loading four at once
  for (int x = 0; x < out_w; ++x) fractions[x] = lx[x].f;
#endif
  parallel_rows(out_h, row_group, [&](int y_begin, int y_end) {
    std::vector<float> row(static_cast<size_t>(sw) * 4);
    for (int y = y_begin; y < y_end; ++y) {
      const Lerp& v = ly[y];
      const float* r0 = k.row(v.i0);
      const float* r1 = k.row(v.i1);
      for (size_t i = 0; i < row.size(); ++i) row[i] = r0[i] + (r1[i] - r0[i]) * v.f;
      const int8_t* flat_row = cell_flat.data() + static_cast<size_t>(v.i0) * sw;
      const uint8_t* px = rgb + static_cast<size_t>(y) * out_w * 3;
      float* out = q.row(y);
      for (const Run& run : runs) {
        if (flat_row[run.cell] >= 0) {
          std::fill(out + run.x0, out + run.x1, static_cast<float>(flat_row[run.cell]));
          continue;
        }
        int x = run.x0;
#if defined(__AVX2__)
        // Four pixels a step (the AVX2 build, which has SSE4.1): a run shares its two grid points,
        // so only the weight and the colour change; the scalar loop's operations in its order (no
        // FMA), so the same values. A 16-byte load reads two pixels past the four.
        {
          const float* p0 = row.data() + static_cast<size_t>(lx[run.x0].i0) * 4;
          const float* p1 = row.data() + static_cast<size_t>(lx[run.x0].i1) * 4;
          __m128 base[4], step[4];
          for (int c = 0; c < 4; ++c) {
            base[c] = _mm_set1_ps(p0[c]);
            step[c] = _mm_set1_ps(p1[c] - p0[c]);
          }
          const __m128i planar = _mm_setr_epi8(0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11, -1, -1, -1, -1);
          const __m128 inv255 = _mm_set1_ps(1.f / 255.f), zero = _mm_setzero_ps(), one = _mm_set1_ps(1.f);
          for (; x + 4 <= run.x1 && x + 6 <= out_w; x += 4) {
            const __m128 f = _mm_loadu_ps(fractions.data() + x);
            const __m128i bytes = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(px + x * 3)), planar);
            const __m128 r = _mm_cvtepi32_ps(_mm_cvtepu8_epi32(bytes));
            const __m128 g = _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_srli_si128(bytes, 4)));
            const __m128 b = _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
            const __m128 ar = _mm_add_ps(base[0], _mm_mul_ps(step[0], f)), ag = _mm_add_ps(base[1], _mm_mul_ps(step[1], f));
            const __m128 ab = _mm_add_ps(base[2], _mm_mul_ps(step[2], f)), ac = _mm_add_ps(base[3], _mm_mul_ps(step[3], f));
            const __m128 dot = _mm_add_ps(_mm_add_ps(_mm_mul_ps(ar, r), _mm_mul_ps(ag, g)), _mm_mul_ps(ab, b));
            const __m128 value = _mm_add_ps(ac, _mm_mul_ps(dot, inv255));
            _mm_storeu_ps(out + x, _mm_min_ps(_mm_max_ps(value, zero), one));
          }
        }
#endif
        for (; x < run.x1; ++x) {
          const Lerp& h = lx[x];
          const float* p0 = row.data() + static_cast<size_t>(h.i0) * 4;
          const float* p1 = row.data() + static_cast<size_t>(h.i1) * 4;
          const float ar = p0[0] + (p1[0] - p0[0]) * h.f, ag = p0[1] + (p1[1] - p0[1]) * h.f;
          const float ab = p0[2] + (p1[2] - p0[2]) * h.f, b = p0[3] + (p1[3] - p0[3]) * h.f;
          const float value = b + (ar * px[x * 3] + ag * px[x * 3 + 1] + ab * px[x * 3 + 2]) * (1.f / 255.f);
          out[x] = std::clamp(value, 0.f, 1.f);
        }
      }
      finish(y, out);
    }
  });
  return q;
}

namespace {

// Blur fusion runs at full resolution up to kForegroundFullPixels, above that at an integer
// fraction of the resolution of no more than kForegroundWorkPixels. The blurs' radii scale with the
// working resolution, so the estimate is the same blur in image pixels on a coarser grid: at 2 MP a
// 0.22 MP grid instead of 0.5 MP changed band colours by 0.6 levels on average (0.3 % of them by
// more than 8) for about 15 ms less CPU (docs/performance.md).
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
