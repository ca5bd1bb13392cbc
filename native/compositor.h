// The output's pixels from the alpha and the foreground colours, a row at a time: the PNG writer
// asks for rows as it compresses them (png_writer.h), the other formats get the whole image. The
// alpha and colours cover a rectangle of the canvas (Placement); the rest of the canvas is
// transparent, or the background where there is one (a colour, or an image of the canvas' size).
// A shadow (shadow.h), where there is one, lies between the subject and the background, over the
// whole canvas; an outline (outline.h), where there is one, between the subject and the shadow.
// For zip without a background the output is the colours themselves, 3 bands, black outside the
// rectangle (and under the shadow): the alpha, encoded beside them (Composed::ZipAlpha), makes them
// the cut-out. For zip with channels=alpha they are the mask as grey, and the alpha beside them is
// opaque.
#pragma once
#include <cstdint>

#include "buffers.h"
#include "options.h"
#include "outline.h"
#include "pixels.h"
#include "plane.h"
#include "shadow.h"

namespace bgone {

// What a Composer writes: the output, or the one-band alpha that a zip holds beside its colours.
enum class Composed { Image, ZipAlpha };

class Composer {
 public:
  // `format` is the one encoded (never Auto); `background`, when not null, is canvas-sized RGB or
  // RGBA; `shadow` and `outline`, when not null, are composed under the subject (not into a mask),
  // the outline over the shadow.
  Composer(const JobOptions& o, OutputFormat format, const Plane& alpha, const Buffer<uint8_t>& fg, const Placement& at,
           const Pixels* background, const ShadowLayer* shadow = nullptr, Composed part = Composed::Image,
           const OutlineLayer* outline = nullptr);

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
  enum class Mode {
    Mask,          // channels=alpha: the subject's alpha, one band
    MaskAsColour,  // zip with channels=alpha: the mask as grey, three bands
    Opaque,        // the alpha beside it: 255, one band
    ZipAlpha,      // the alpha beside a zip's colours: the cut-out's, its shadow included, one band
    Colours,       // zip without a background: the colours as they are, no alpha
    Transparent,   // RGBA on no background
    OnBackground,  // on the background (or white for JPEG), RGB or RGBA
  };

  static void transparent_row(const float* alpha, const uint8_t* fg, int w, uint8_t* out);
  // The shadowed row of a Transparent, Colours or ZipAlpha output: the shadow under the subject over
  // the whole row, the colours un-premultiplied.
  void shadowed_row(const float* alpha, const uint8_t* fg, int x0, int x1, const float* shadow, uint8_t* out) const;

  // A row with an outline, in any mode but the masks': the subject over the outline over the
  // shadow (where there is one) over the background (where there is one).
  void outlined_row(int y, const float* alpha, const uint8_t* fg, int x0, int x1, uint8_t* out) const;

  bool covers_canvas() const;

  const JobOptions& o_;
  const Plane& alpha_;
  const Buffer<uint8_t>& fg_;
  const Placement at_;
  const Pixels* bg_image_;
  const ShadowLayer* shadow_;
  const OutlineLayer* outline_;
  Mode mode_ = Mode::Transparent;
  bool keep_alpha_ = true;
  float bg_[3] = {1, 1, 1}, bg_a_ = 1;
  int bands_ = 4;
};

}  // namespace bgone
