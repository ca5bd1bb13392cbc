// Float planes and their resampling: the matte's working form from the model's mask to the output.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "buffers.h"

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

// Resamples `src` to out_w x out_h; a linear (tent) filter widened when shrinking, edges clamped.
Plane resample_plane(const Plane& src, int out_w, int out_h, AxisMap mx, AxisMap my);

// 0..1 to 0..255 with rounding (no libm call: this runs per pixel of 16 MP images).
inline uint8_t unit_to_byte(float v) { return static_cast<uint8_t>((v <= 0.f ? 0.f : v >= 1.f ? 1.f : v) * 255.f + 0.5f); }

// Bilinear sample positions along one axis (upsampling: every output maps between two samples).
struct Lerp {
  int i0, i1;
  float f;
};
std::vector<Lerp> lerps(int out_n, int src_n, AxisMap map);

}  // namespace bgone
