// "Blur fusion" foreground colour estimation (Forte & Pitie, ICIP 2021): the colour of
// semi-transparent pixels is solved so that it carries no background colour.
#pragma once
#include <cstdint>
#include <vector>

#include "buffers.h"
#include "parallel.h"
#include "plane.h"

namespace bgone {

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
