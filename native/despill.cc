#include "despill.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "box_mean.h"
#include "parallel.h"

namespace bgone {

namespace {

// The background's pixels of the model's input: mask below this.
constexpr float kClear = 0.05f;
// The band's radius spans at least this many cells of the coarse grid, whose larger side is at
// most about kGridSide cells.
constexpr double kBandCells = 4;
constexpr double kGridSide = 512;
// The weight is this times the background's share within the band around a pixel: on a straight
// edge the share falls from 1/2 at the edge to 0 at the band's width, so the weight is 1 over its
// first half.
constexpr float kGain = 4.f;

}  // namespace

int spill_channel(const Pixels& small, const Plane& mask, float margin) {
  double sum[3] = {0, 0, 0};
  size_t count = 0;
  const uint8_t* px = small.data.data();
  for (size_t i = 0; i < mask.v.size(); ++i) {
    if (!(mask.v[i] < kClear)) continue;
    for (int c = 0; c < 3; ++c) sum[c] += px[i * 3 + c];
    ++count;
  }
  if (count == 0) return -1;
  const double r = sum[0] / count / 255, g = sum[1] / count / 255, b = sum[2] / count / 255;
  if (g - std::max(r, b) >= margin) return 1;
  if (b - std::max(r, g) >= margin) return 2;
  return -1;
}

void despill(Buffer<uint8_t>& rgb, const Plane& alpha, int channel, double band) {
  const int w = alpha.width, h = alpha.height;
  const double coarse = std::ceil(std::max(w, h) / kGridSide);
  const int factor = std::max(1, static_cast<int>(std::min(coarse, std::floor(band / kBandCells))));
  const int radius = std::max(1, static_cast<int>(std::lround(band / factor)));
  Plane background = shrink_plane(alpha, Region{0, 0, w, h}, factor, 0);
  for (float& v : background.v) v = 1.f - v;
  Plane weight(background.width, background.height, Unfilled{});
  auto source = [&background](int y, int xa, int xb, float* row) { std::copy(background.row(y) + xa, background.row(y) + xb, row + xa); };
  auto sink = [&weight](int y, const float* mean) {
    float* out = weight.row(y);
    for (int x = 0; x < weight.width; ++x) out[x] = std::min(1.f, kGain * mean[x]);
  };
  parallel_bands(weight.height,
                 [&](int b0, int b1) { stream_box_mean<1>(weight.width, weight.height, radius, b0, b1, 0, weight.width, source, sink); });
  // Pixel centre -> cell centre.
  const AxisMap map{1.0 / factor, 0.5 / factor - 0.5};
  const std::vector<Lerp> columns = lerps(w, weight.width, map), rows = lerps(h, weight.height, map);
  const int other = channel == 1 ? 2 : 1;  // the channel beside red that is not the key
  parallel_rows(h, [&](int first, int end) {
    for (int y = first; y < end; ++y) {
      const Lerp& r = rows[y];
      const float* top = weight.row(r.i0);
      const float* bottom = weight.row(r.i1);
      uint8_t* px = rgb.data() + static_cast<size_t>(y) * w * 3;
      for (int x = 0; x < w; ++x, px += 3) {
        const int limit = std::max(px[0], px[other]);
        if (px[channel] <= limit) continue;
        const Lerp& c = columns[x];
        const float t = top[c.i0] + (top[c.i1] - top[c.i0]) * c.f;
        const float k = t + (bottom[c.i0] + (bottom[c.i1] - bottom[c.i0]) * c.f - t) * r.f;
        px[channel] = static_cast<uint8_t>(std::lround(px[channel] - k * (px[channel] - limit)));
      }
    }
  });
}

}  // namespace bgone
