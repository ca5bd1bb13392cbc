// The streaming box mean that the guided filter and the foreground estimate share.
#pragma once
#include <algorithm>
#include <vector>

#include "buffers.h"

namespace bgone {

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

}  // namespace bgone
