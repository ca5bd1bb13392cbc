// The fast guided filter (He & Sun, 2015): the linear model alpha = a.I + b is fitted at the model's
// resolution with the model's own input image as the colour guide, then its coefficients are
// resampled and applied to the full-resolution image, so edges follow the real colour edges instead
// of a bilinear blur.
#pragma once
#include <cstdint>
#include <functional>

#include "buffers.h"
#include "parallel.h"
#include "plane.h"

namespace bgone {

// The guided filter's coefficients on the grid they were fitted on, four per pixel, interleaved:
// a_r, a_g, a_b, b, where alpha = a . rgb + b with rgb in 0..1.
struct GuidedCoefficients {
  int width = 0, height = 0;
  Buffer<float> v;
  const float* row(int y) const { return v.data() + static_cast<size_t>(y) * width * 4; }
};
// Fits the colour guided filter of `mask` guided by `rgb` (interleaved 8-bit, the mask's size) on a
// grid `factor` times coarser: both are averaged factor x factor on the way in (what is left past
// the last whole block is dropped), and box means of `radius` are taken on that grid.
GuidedCoefficients fit_guided_coarse(const uint8_t* rgb, const Plane& mask, int factor, int radius, double eps);
// What finish (below) does with the values at the ends of 0..1: every value up to `zero_up_to`
// finishes as 0 does, every value from `one_from` as 1 does (levels; without them 0 and 1).
struct FinishFlat {
  float zero_up_to = 0, one_from = 1;
};
// Applies resampled coefficients to the output image (interleaved 8-bit RGB, out_w x out_h): the
// alpha, clamped to 0..1. finish(y, row) then gets each row while it is still in the cache, rows in
// order within whole groups of `row_group` rows, each group on one thread (ForegroundInputs).
// Where the coefficients around a stretch of a row bound the alpha to one of finish's flat ends
// whatever the colours, the stretch is written as 0 or 1 without a per-pixel product: in a photo
// that is most of the background and of the subject's inside. The result is the same.
Plane apply_guided(const GuidedCoefficients& coefficients, const uint8_t* rgb, int out_w, int out_h, AxisMap mx, AxisMap my,
                   FinishFlat flat, const std::function<void(int, float*)>& finish, int row_group = 1);

}  // namespace bgone
