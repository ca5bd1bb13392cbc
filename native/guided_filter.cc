#include "guided_filter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "box_mean.h"

namespace bgone {

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

}  // namespace bgone
