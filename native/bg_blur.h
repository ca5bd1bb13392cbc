// The blurred original behind the subject (bg_blur; docs/contract.md, "Effects"): the photo placed
// on the canvas by the same map as the cut-out, its edge repeated where the canvas reaches past it,
// blurred on a grid coarser than the canvas and sampled bilinearly back to the canvas' size, where
// the compositor takes it as a background image.
#pragma once

#include "image_io.h"
#include "options.h"
#include "pixels.h"

namespace bgone {

// The canvas' map of the image, per axis: image = a + canvas * k (canvas and image pixel edges).
struct CanvasMap {
  int canvas_w = 0, canvas_h = 0;
  double ax = 0, ay = 0, kx = 1, ky = 1;
};

// The canvas-sized RGB background of o.bg_blur (Gaussian or Bokeh) at o.bg_blur_radius of the
// canvas' larger side, from the full decode `image` (read, not taken over).
Pixels blurred_background(const JobOptions& o, const DecodedImage& image, const CanvasMap& map);

}  // namespace bgone
