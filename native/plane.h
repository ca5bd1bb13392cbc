// Float planes and their resampling: the matte's working form from the model's mask to the output.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "buffers.h"
#include "pixels.h"

namespace bgone {

// Asks a Plane for no fill: for a plane that is written whole before it is read.
struct Unfilled {};

struct Plane {
  int width = 0, height = 0;
  Buffer<float> v;
  Plane() = default;
  Plane(int w, int h, float fill = 0.f) : width(w), height(h), v(static_cast<size_t>(w) * h, fill) {}
  Plane(int w, int h, Unfilled) : width(w), height(h), v(static_cast<size_t>(w) * h) {}
  float* row(int y) { return v.data() + static_cast<size_t>(y) * width; }
  const float* row(int y) const { return v.data() + static_cast<size_t>(y) * width; }
};

// Source coordinate (pixel centres) of an output pixel centre: src = scale * out + offset, per axis.
struct AxisMap {
  double scale = 1, offset = 0;
};

// Clamps every value of `p` to 0..1 in place (a NaN becomes 0), in one loop without branches.
void clamp_unit(Plane& p);

// Resamples `src` to out_w x out_h; a linear (tent) filter widened when shrinking, edges clamped.
Plane resample_plane(const Plane& src, int out_w, int out_h, AxisMap mx, AxisMap my);

// The `window` of `src` on a grid `factor` times coarser, with `margin` cells of 0 around it: each
// cell the mean of its factor x factor pixels (a cell past the window's last row or column counts
// the pixels it lacks as 0), on the free cores.
Plane shrink_plane(const Plane& src, const Region& window, int factor, int margin);

// A Gaussian-like blur in place: three passes of box means of radius r (clipped at the borders),
// whose standard deviation is sqrt(r (r + 1)).
void blur_plane(Plane& p, int r);
// The box radius (at least 1) whose three passes come closest to a Gaussian of standard deviation
// `sigma`.
int blur_radius(double sigma);

// 0..1 to 0..255 with rounding (no libm call: this runs per pixel of 16 MP images).
inline uint8_t unit_to_byte(float v) { return static_cast<uint8_t>((v <= 0.f ? 0.f : v >= 1.f ? 1.f : v) * 255.f + 0.5f); }

// Bilinear sample positions along one axis (upsampling: every output maps between two samples).
struct Lerp {
  int i0, i1;
  float f;
};
std::vector<Lerp> lerps(int out_n, int src_n, AxisMap map);

// Where a plane lies on the canvas: its top-left corner at (x, y).
struct Placement {
  int canvas_w = 0, canvas_h = 0, x = 0, y = 0;
};

}  // namespace bgone
