// despill=true: the colour that a green or blue screen spills onto the subject taken off its edges
// (docs/contract.md, "Effects"), on the foreground colours once they are estimated.
#pragma once
#include <cstdint>

#include "buffers.h"
#include "pixels.h"
#include "plane.h"

namespace bgone {

// The channel the background spills: green (1) or blue (2) where that channel of its colour (the
// mean of the model's input where the mask is below 0.05) exceeds the larger of the two others by
// `margin` (in 0..1); -1 for any other colour, or where no pixel is background.
int spill_channel(const Pixels& small, const Plane& mask, float margin);

// Limits `channel` of `rgb` (interleaved 8-bit colours, the size of `alpha`, the finished matte) to
// the larger of the two other channels near the background: fully within about half of `band`
// pixels of it, less and less farther in, not at all from `band` on; semi-transparent and opaque
// pixels alike. The nearness is a box mean of the background's share on a coarser grid.
void despill(Buffer<uint8_t>& rgb, const Plane& alpha, int channel, double band);

}  // namespace bgone
