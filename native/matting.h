// Turning the model's low-resolution mask into a clean alpha matte at output resolution, and the
// colour work that goes with it. Pure C++ on float planes, no libvips.
//
// - resample_plane: antialiased linear resampling with an affine coordinate map (mask -> output).
// - GuidedUpsampler: the fast guided filter (He & Sun, 2015): the linear model alpha = a.I + b is
//   fitted at the model's resolution with the model's own input image as the colour guide, then its
//   coefficients are resampled and applied to the full-resolution image, so edges follow the real
//   colour edges instead of a bilinear blur.
// - estimate_foreground: "blur fusion" foreground colour estimation (Forte & Pitie, ICIP 2021): the
//   colour of semi-transparent pixels is solved so that it carries no background colour.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "buffers.h"
#include "parallel.h"

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

// What the foreground estimate reads of the full-resolution image and alpha, taken a row at a time
// while apply_guided finishes each (the row then still in the cache) instead of in two more passes
// over both planes: the box around the semi-transparent pixels, and both shrunk to the working grid
// the blurs run on. At 12 MP those passes took 11 ms on two cores, mostly waiting on memory.
class ForegroundInputs {
 public:
  ForegroundInputs(int width, int height);
  // Rows come in whole groups of this many (one cell of the working grid), each group's in order on
  // one thread: apply_guided's row_group.
  int row_group() const { return factor_; }
  // Row y of the image (interleaved 8-bit RGB) and of the finished alpha (0..1).
  void add_row(int y, const uint8_t* rgb, const float* alpha);

 private:
  friend void estimate_foreground(Buffer<uint8_t>& rgb, const Plane& alpha, ForegroundInputs& inputs);
  int width_, height_, factor_;
  std::vector<int> first_x_, end_x_;  // per row, the semi-transparent pixels' columns (empty: none)
  Buffer<float> image_;               // the working grid's colours (0..1), interleaved
  Plane alpha_;                       // and alpha
};

// Replaces the colours of the pixels with 0 < alpha < 1 by their foreground colours, in place; the
// others keep the image colour. rgb is interleaved 8-bit, the size of alpha; alpha is 0..1; inputs
// has had every row of both.
void estimate_foreground(Buffer<uint8_t>& rgb, const Plane& alpha, ForegroundInputs& inputs);

}  // namespace bgone
