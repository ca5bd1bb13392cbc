// The output's pixels from the alpha and the foreground colours, a row at a time: the PNG writer
// asks for rows as it compresses them (png_writer.h), the other formats get the whole image.
#pragma once
#include <cstdint>

#include "buffers.h"
#include "options.h"
#include "pixels.h"
#include "plane.h"

namespace bgone {

class Composer {
 public:
  Composer(const JobOptions& o, const Plane& alpha, const Buffer<uint8_t>& fg);

  int width() const { return alpha_.width; }
  int height() const { return alpha_.height; }
  int bands() const { return bands_; }

  // Row y of the output, bands() bytes per pixel.
  void row(int y, uint8_t* out) const;
  // The whole output, composed on the free cores.
  Pixels whole() const;

 private:
  static void transparent_row(const float* alpha, const uint8_t* fg, int w, uint8_t* out);

  const JobOptions& o_;
  const Plane& alpha_;
  const Buffer<uint8_t>& fg_;
  bool has_bg_ = false, keep_alpha_ = true;
  float bg_[3] = {1, 1, 1}, bg_a_ = 1;
  int bands_ = 4;
};

}  // namespace bgone
