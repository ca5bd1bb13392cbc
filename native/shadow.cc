#include "shadow.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace bgone {

namespace {

// The subject's larger side spans at least this many cells of the grid: the blurs are wider than
// a cell, and the grid is sampled bilinearly.
constexpr int kSubjectCells = 256;
// The matte read around the subject's box (mask >= 0.5), as a share of its larger side: its soft
// edge lies partly outside the box.
constexpr double kAround = 0.05;

// What the subject's matte weighs at the top of the contact band against its foot: a part low above
// the ground (a car's sills between its wheels) shades it less than the part that stands on it.
constexpr float kBandTop = 0.4f;

// The ground under the subject, per column of the grid of `matte` (cells): the lower hull of the
// subject's lowest cells (matte >= 0.5) within `band` rows above its base (`base`, a row boundary),
// so the line through where it stands (a car's wheels, a person's feet) rather than its lowest point
// alone; NaN outside the columns it stands on.
std::vector<double> ground_line(const Plane& matte, double base, double band) {
  const int first = std::clamp(static_cast<int>(std::floor(base - band)), 0, matte.height);
  const int end = std::clamp(static_cast<int>(std::ceil(base)), first, matte.height);
  std::vector<std::pair<int, double>> hull;  // (column, the row boundary below its lowest cell)
  for (int x = 0; x < matte.width; ++x) {
    int lowest = -1;
    for (int y = end - 1; y >= first && lowest < 0; --y) {
      if (matte.row(y)[x] >= 0.5f) lowest = y;
    }
    if (lowest < 0) continue;
    const std::pair<int, double> p{x, lowest + 1.0};
    // Keep the hull below every point: drop a last point that lies above the line to the new one.
    while (hull.size() >= 2) {
      const auto& o = hull[hull.size() - 2];
      const auto& a = hull.back();
      if ((a.first - o.first) * (p.second - o.second) - (a.second - o.second) * (p.first - o.first) < 0) break;
      hull.pop_back();
    }
    hull.push_back(p);
  }
  std::vector<double> ground(matte.width, std::nan(""));
  for (size_t i = 0; i < hull.size(); ++i) {
    const auto& a = hull[i];
    const auto& b = i + 1 < hull.size() ? hull[i + 1] : a;
    for (int x = a.first; x <= b.first; ++x) {
      ground[x] = b.first == a.first ? a.second : a.second + (b.second - a.second) * (x - a.first) / (b.first - a.first);
    }
  }
  return ground;
}

// The contact shadow on the grid of the matte `matte` (cells), the subject's base at grid row
// `base`: in each column the subject stands on, its largest matte over the `band` cells above the
// ground (weighed from 1 on the ground to kBandTop at the band's top), spread over `half` cells on
// either side of the ground, fading linearly to 0.
Plane contact_band(const Plane& matte, double base, double band, double half) {
  Plane out(matte.width, matte.height);
  const std::vector<double> ground = ground_line(matte, base, band);
  for (int x = 0; x < matte.width; ++x) {
    const double g = ground[x];
    if (std::isnan(g)) continue;
    float stands = 0.f;
    for (int y = std::max(0, static_cast<int>(std::floor(g - band))); y < std::min(matte.height, static_cast<int>(std::ceil(g))); ++y) {
      const float height = static_cast<float>(std::clamp((g - (y + 0.5)) / std::max(band, 1.0), 0.0, 1.0));
      stands = std::max(stands, matte.row(y)[x] * (1.f - (1.f - kBandTop) * height));
    }
    const int y0 = std::max(0, static_cast<int>(std::floor(g - half))), y1 = std::min(out.height, static_cast<int>(std::ceil(g + half)));
    for (int y = y0; y < y1; ++y) {
      const double weight = 1 - std::fabs(y + 0.5 - g) / half;
      if (weight > 0) out.row(y)[x] = static_cast<float>(stands * weight);
    }
  }
  return out;
}

}  // namespace

ShadowLayer::ShadowLayer(const JobOptions& o, const Plane& alpha, const Placement& at, const Region& subject) {
  const bool drop = o.shadow == ShadowKind::Drop;
  const double size = std::max(subject.w, subject.h);  // canvas pixels
  const int factor = std::max(1, static_cast<int>(size / kSubjectCells));
  // The matte's pixels around the subject (in the matte plane's own coordinates): the rest of the
  // plane, farther from the subject, casts no shadow.
  const int around = static_cast<int>(std::ceil(kAround * size));
  const int x0 = std::clamp(subject.x - at.x - around, 0, alpha.width), y0 = std::clamp(subject.y - at.y - around, 0, alpha.height);
  const int x1 = std::clamp(subject.x + subject.w - at.x + around, x0, alpha.width);
  const int y1 = std::clamp(subject.y + subject.h - at.y + around, y0, alpha.height);
  const Region window{x0, y0, x1 - x0, y1 - y0};
  const double offset_x = drop ? o.shadow_offset_x * size : 0, offset_y = drop ? o.shadow_offset_y * size : 0;
  const double half = drop ? 0 : o.contact_height * size / 2 / factor;  // cells
  const int radius = blur_radius((drop ? o.shadow_blur : o.contact_blur) * size / factor);
  // A margin of 0 around the matte wide enough for the offset, the contact band and the blurs'
  // reach (three passes of `radius`), so that every canvas pixel beyond samples 0.
  const int margin = static_cast<int>(std::ceil((std::max(std::fabs(offset_x), std::fabs(offset_y))) / factor + half)) + 3 * radius + 2;
  grid_ = shrink_plane(alpha, window, factor, margin);
  if (!drop) {
    const double base = static_cast<double>(subject.y + subject.h - at.y - window.y) / factor + margin;
    grid_ = contact_band(grid_, base, o.contact_band * size / factor, half);
  }
  blur_plane(grid_, radius);
  for (float& v : grid_.v) v *= o.shadow_opacity;
  // Canvas pixel centre -> grid cell centre, the shadow at p being the matte at p - offset.
  const AxisMap mx{1.0 / factor, (0.5 - offset_x - at.x - window.x) / factor - 0.5 + margin};
  const AxisMap my{1.0 / factor, (0.5 - offset_y - at.y - window.y) / factor - 0.5 + margin};
  columns_ = lerps(at.canvas_w, grid_.width, mx);
  rows_ = lerps(at.canvas_h, grid_.height, my);
}

void ShadowLayer::row(int y, float* out) const {
  const Lerp& r = rows_[y];
  const float* top = grid_.row(r.i0);
  const float* bottom = grid_.row(r.i1);
  for (size_t x = 0; x < columns_.size(); ++x) {
    const Lerp& c = columns_[x];
    const float t = top[c.i0] + (top[c.i1] - top[c.i0]) * c.f;
    const float b = bottom[c.i0] + (bottom[c.i1] - bottom[c.i0]) * c.f;
    out[x] = t + (b - t) * r.f;
  }
}

}  // namespace bgone
