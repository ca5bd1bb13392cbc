#include "interior.h"

#include <vector>

#include "box_mean.h"
#include "parallel.h"

namespace bgone {

namespace {

// The background: 1 where a pixel below 0.5 is reached from the border through pixels below 0.5.
std::vector<uint8_t> outside(const Plane& mask) {
  const int w = mask.width, h = mask.height;
  std::vector<uint8_t> seen(static_cast<size_t>(w) * h, 0);
  std::vector<int> stack;
  auto visit = [&](int x, int y) {
    const size_t i = static_cast<size_t>(y) * w + x;
    if (seen[i] || !(mask.v[i] < 0.5f)) return;
    seen[i] = 1;
    stack.push_back(static_cast<int>(i));
  };
  for (int x = 0; x < w; ++x) {
    visit(x, 0);
    visit(x, h - 1);
  }
  for (int y = 0; y < h; ++y) {
    visit(0, y);
    visit(w - 1, y);
  }
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    const int x = i % w, y = i / w;
    if (x > 0) visit(x - 1, y);
    if (x + 1 < w) visit(x + 1, y);
    if (y > 0) visit(x, y - 1);
    if (y + 1 < h) visit(x, y + 1);
  }
  return seen;
}

}  // namespace

Plane fill_interior(Plane& mask, float clear, int inset) {
  const int w = mask.width, h = mask.height;
  const std::vector<uint8_t> background = outside(mask);
  // What stays transparent, as 0 and 1, and its box mean over the square of `inset` around each
  // pixel: above 0 (half a pixel's share, for the running sums' rounding) where any is that near.
  Plane kept(w, h, Unfilled{});
  for (size_t i = 0; i < kept.v.size(); ++i) kept.v[i] = background[i] || mask.v[i] <= clear ? 1.f : 0.f;
  const float near = 0.5f / ((2.f * inset + 1) * (2.f * inset + 1));
  Plane filled(w, h);
  auto source = [&kept](int y, int xa, int xb, float* row) { std::copy(kept.row(y) + xa, kept.row(y) + xb, row + xa); };
  auto sink = [&](int y, const float* mean) {
    float* m = mask.row(y);
    float* f = filled.row(y);
    for (int x = 0; x < w; ++x) {
      if (mean[x] >= near) continue;
      m[x] = 1.f;
      f[x] = 1.f;
    }
  };
  parallel_bands(h, [&](int b0, int b1) { stream_box_mean<1>(w, h, inset, b0, b1, 0, w, source, sink); });
  return filled;
}

}  // namespace bgone
