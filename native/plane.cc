#include "plane.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "box_mean.h"
#include "parallel.h"

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

void clamp_unit(Plane& p) {
  float* v = p.v.data();
  const size_t n = p.v.size();
  for (size_t i = 0; i < n; ++i) {
    const float above = v[i] >= 0.f ? v[i] : 0.f;  // NaN fails the test too
    v[i] = above <= 1.f ? above : 1.f;
  }
}

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

std::vector<Lerp> lerps(int out_n, int src_n, AxisMap map) {
  std::vector<Lerp> l(out_n);
  for (int o = 0; o < out_n; ++o) {
    const double pos = std::clamp(map.scale * o + map.offset, 0.0, static_cast<double>(src_n - 1));
    const int i0 = static_cast<int>(pos);
    l[o] = {i0, std::min(i0 + 1, src_n - 1), static_cast<float>(pos - i0)};
  }
  return l;
}

Plane shrink_plane(const Plane& src, const Region& window, int factor, int margin) {
  const int cells_w = (window.w + factor - 1) / factor, cells_h = (window.h + factor - 1) / factor;
  Plane out(cells_w + 2 * margin, cells_h + 2 * margin);
  const float share = 1.f / (static_cast<float>(factor) * factor);
  parallel_rows(cells_h, [&](int first, int end) {
    for (int cy = first; cy < end; ++cy) {
      float* cells = out.row(cy + margin) + margin;
      for (int y = cy * factor; y < std::min(window.h, (cy + 1) * factor); ++y) {
        const float* in = src.row(window.y + y) + window.x;
        for (int cx = 0; cx < cells_w; ++cx) {
          float sum = 0.f;
          for (int x = cx * factor; x < std::min(window.w, (cx + 1) * factor); ++x) sum += in[x];
          cells[cx] += sum;
        }
      }
      for (int cx = 0; cx < cells_w; ++cx) cells[cx] *= share;
    }
  });
  return out;
}

void blur_plane(Plane& p, int r) {
  Plane next(p.width, p.height, Unfilled{});
  for (int pass = 0; pass < 3; ++pass) {
    auto source = [&p](int y, int xa, int xb, float* row) { std::copy(p.row(y) + xa, p.row(y) + xb, row + xa); };
    auto sink = [&next](int y, const float* mean) { std::copy(mean, mean + next.width, next.row(y)); };
    parallel_bands(p.height, [&](int b0, int b1) { stream_box_mean<1>(p.width, p.height, r, b0, b1, 0, p.width, source, sink); });
    std::swap(p.v, next.v);
  }
}

int blur_radius(double sigma) { return std::max(1, static_cast<int>(std::lround((std::sqrt(1 + 4 * sigma * sigma) - 1) / 2))); }

}  // namespace bgone
