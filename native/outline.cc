#include "outline.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "parallel.h"

namespace bgone {

namespace {

// The outline's width spans at least this many cells (a cell is at most 1/16 of it, so the
// subject's edge on the grid is within half a cell, 1/32 of the width, of where the matte has it);
// the grid's larger side has at most kMaxCells cells, so its planes stay small at any canvas.
constexpr double kWidthCells = 16;
constexpr double kMaxCells = 1024;
// The blurred edge's table: its reach each side of the edge, in standard deviations, and its steps.
constexpr double kRampReach = 4;
constexpr int kRampSteps = 1024;

constexpr double kFar = 1e20;  // no subject cell on the line yet (a squared distance)

// One line of the two-pass Euclidean distance transform (Felzenszwalb and Huttenlocher): out[q] is
// the least (q - p)^2 + in[p] over p, from the lower envelope of the parabolas rooted at each p.
// `v` and `z` hold n and n + 1 entries.
void distance_line(const double* in, int n, double* out, int* v, double* z) {
  int k = 0;
  v[0] = 0;
  z[0] = -std::numeric_limits<double>::infinity();
  z[1] = std::numeric_limits<double>::infinity();
  auto meet = [in](int q, int p) {
    return ((in[q] + static_cast<double>(q) * q) - (in[p] + static_cast<double>(p) * p)) / (2.0 * (q - p));
  };
  for (int q = 1; q < n; ++q) {
    double s = meet(q, v[k]);
    while (s <= z[k]) s = meet(q, v[--k]);  // z[0] is -infinity: stops at k = 0
    ++k;
    v[k] = q;
    z[k] = s;
    z[k + 1] = std::numeric_limits<double>::infinity();
  }
  k = 0;
  for (int q = 0; q < n; ++q) {
    while (z[k + 1] < q) ++k;
    const double d = q - v[k];
    out[q] = d * d + in[v[k]];
  }
}

}  // namespace

OutlineLayer::OutlineLayer(const JobOptions& o, const Plane& alpha, const Placement& at) {
  const int W = at.canvas_w, H = at.canvas_h;
  const double side = std::max(W, H);
  width_ = static_cast<float>(o.outline_width * side);
  blur_ = static_cast<float>(o.outline_blur * side);
  for (int c = 0; c < 3; ++c) colour_[c] = o.outline_color[c] / 255.f;
  opacity_ = o.outline_color[3] / 255.f;
  const int least = std::max(1, static_cast<int>(std::ceil(side / kMaxCells)));
  const int f = std::max(least, static_cast<int>(std::floor(width_ / kWidthCells)));
  factor_ = f;
  const int gw = (W + f - 1) / f, gh = (H + f - 1) / f;
  // The subject on the grid: a cell whose pixels' mean matte (those of the canvas; outside the
  // matte's plane 0) is at least 0.5, as squared distances: 0 there, kFar elsewhere.
  Plane seeds(gw, gh, Unfilled{});
  parallel_rows(gh, [&](int first, int end) {
    std::vector<double> sums(gw);
    for (int cy = first; cy < end; ++cy) {
      std::fill(sums.begin(), sums.end(), 0.0);
      const int y0 = cy * f, y1 = std::min(H, y0 + f);
      for (int y = std::max(y0, at.y); y < std::min(y1, at.y + alpha.height); ++y) {
        const float* a = alpha.row(y - at.y);
        for (int cx = 0; cx < gw; ++cx) {
          const int x0 = std::max(cx * f, at.x), x1 = std::min({(cx + 1) * f, W, at.x + alpha.width});
          float sum = 0.f;
          for (int x = x0; x < x1; ++x) sum += a[x - at.x];
          sums[cx] += sum;
        }
      }
      float* row = seeds.row(cy);
      for (int cx = 0; cx < gw; ++cx) {
        const int pixels = (std::min(W, (cx + 1) * f) - cx * f) * (y1 - y0);
        row[cx] = sums[cx] >= 0.5 * pixels ? 0.f : static_cast<float>(kFar);
      }
    }
  });
  // The distance transform: down each column, then along each row.
  distance_ = Plane(gw, gh, Unfilled{});
  parallel_rows(gw, [&](int first, int end) {
    std::vector<double> in(gh), out(gh), z(gh + 1);
    std::vector<int> v(gh);
    for (int x = first; x < end; ++x) {
      for (int y = 0; y < gh; ++y) in[y] = seeds.row(y)[x];
      distance_line(in.data(), gh, out.data(), v.data(), z.data());
      for (int y = 0; y < gh; ++y) seeds.row(y)[x] = static_cast<float>(out[y]);
    }
  });
  // A cell farther than this from the subject's cells adds nothing, nor does any pixel it is a corner
  // of: bilinear sampling never goes below the least of its four cells.
  const float reach = (width_ + static_cast<float>(kRampReach) * blur_ + 1.f) / f + 1.f;
  reach_first_.assign(gh, 0);
  reach_end_.assign(gh, 0);
  parallel_rows(gh, [&](int first, int end) {
    std::vector<double> in(gw), out(gw), z(gw + 1);
    std::vector<int> v(gw);
    for (int y = first; y < end; ++y) {
      const float* s = seeds.row(y);
      for (int x = 0; x < gw; ++x) in[x] = s[x];
      distance_line(in.data(), gw, out.data(), v.data(), z.data());
      float* d = distance_.row(y);
      int lo = gw, hi = -1;
      for (int x = 0; x < gw; ++x) {
        d[x] = static_cast<float>(std::sqrt(out[x]));
        if (d[x] <= reach) {
          lo = std::min(lo, x);
          hi = x;
        }
      }
      reach_first_[y] = lo;
      reach_end_[y] = hi + 1;
    }
  });
  // Canvas pixel centre -> cell centre.
  const AxisMap to_cell{1.0 / f, 0.5 / f - 0.5};
  columns_ = lerps(W, gw, to_cell);
  rows_ = lerps(H, gh, to_cell);
  if (blur_ > 0) {
    // The edge blurred by a Gaussian of standard deviation blur_: what a blur gives a straight edge,
    // 1 - Phi((d - width) / blur), tabulated over kRampReach deviations each side of it.
    ramp_from_ = width_ - static_cast<float>(kRampReach) * blur_;
    ramp_step_ = static_cast<float>(2 * kRampReach * blur_ / kRampSteps);
    table_.resize(kRampSteps + 1);
    for (int i = 0; i <= kRampSteps; ++i) {
      const double d = ramp_from_ + static_cast<double>(i) * ramp_step_;
      table_[i] = static_cast<float>(0.5 * std::erfc((d - width_) / (blur_ * std::sqrt(2.0))));
    }
  }
}

float OutlineLayer::ramp(float d) const {
  if (table_.empty()) return std::min(std::max(width_ + 0.5f - d, 0.f), 1.f);  // a crisp edge, antialiased
  const float at = (d - ramp_from_) / ramp_step_;
  if (at <= 0.f) return 1.f;
  if (at >= kRampSteps) return 0.f;
  const int i = static_cast<int>(at);
  return table_[i] + (table_[i + 1] - table_[i]) * (at - i);
}

void OutlineLayer::row(int y, float* out) const {
  const Lerp& r = rows_[y];
  const int W = static_cast<int>(columns_.size());
  // The canvas columns whose cells are within reach on either row of cells; 0 elsewhere.
  const int first = std::min(reach_first_[r.i0], reach_first_[r.i1]), end = std::max(reach_end_[r.i0], reach_end_[r.i1]);
  const int x0 = std::clamp((first - 1) * factor_, 0, W), x1 = std::clamp((end + 1) * factor_, x0, W);
  std::fill(out, out + x0, 0.f);
  std::fill(out + x1, out + W, 0.f);
  const float* top = distance_.row(r.i0);
  const float* bottom = distance_.row(r.i1);
  const float f = static_cast<float>(factor_);
  for (int x = x0; x < x1; ++x) {
    const Lerp& c = columns_[x];
    const float t = top[c.i0] + (top[c.i1] - top[c.i0]) * c.f;
    const float b = bottom[c.i0] + (bottom[c.i1] - bottom[c.i0]) * c.f;
    // A cell's edge lies half a cell from its centre: the distance from the subject's edge.
    const float d = (t + (b - t) * r.f - 0.5f) * f;
    out[x] = ramp(d) * opacity_;
  }
}

}  // namespace bgone
