// The output's pixels from the alpha and the foreground colours, a row at a time: the PNG writer
// asks for rows as it compresses them (png_writer.h), the other formats get the whole image. The
// alpha and colours cover a rectangle of the canvas (Placement); the rest of the canvas is
// transparent, or the background where there is one (a colour, or an image of the canvas' size).
// For zip without a background the output is the foreground colours themselves, 3 bands, black
// outside the rectangle: the alpha, encoded beside them, makes them the cut-out.
#pragma once
#include <cstdint>

#include "buffers.h"
#include "options.h"
#include "pixels.h"
#include "plane.h"

namespace bgone {

// Where the alpha plane lies on the canvas: its top-left corner at (x, y).
struct Placement {
  int canvas_w = 0, canvas_h = 0, x = 0, y = 0;
};

class Composer {
 public:
  // `format` is the one encoded (never Auto); `background`, when not null, is canvas-sized RGB or RGBA.
  Composer(const JobOptions& o, OutputFormat format, const Plane& alpha, const Buffer<uint8_t>& fg, const Placement& at,
           const Pixels* background);

  int width() const { return at_.canvas_w; }
  int height() const { return at_.canvas_h; }
  int bands() const { return bands_; }
  // Whether any pixel of the output would have an alpha below 255 in a format that keeps alpha.
  bool translucent() const;

  // Row y of the output, bands() bytes per pixel.
  void row(int y, uint8_t* out) const;
  // The whole output, composed on the free cores.
  Pixels whole() const;

 private:
  static void transparent_row(const float* alpha, const uint8_t* fg, int w, uint8_t* out);

  bool covers_canvas() const;

  const JobOptions& o_;
  const Plane& alpha_;
  const Buffer<uint8_t>& fg_;
  const Placement at_;
  const Pixels* bg_image_;
  bool has_bg_ = false, keep_alpha_ = true;
  bool colours_ = false;  // zip without a background: the foreground colours as they are, no alpha
  float bg_[3] = {1, 1, 1}, bg_a_ = 1;
  int bands_ = 4;
};

}  // namespace bgone
