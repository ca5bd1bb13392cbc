// semitransparency=false: the matte made opaque where it is semi-transparent inside the subject
// (glass, a car's windows), at the mask's resolution (docs/contract.md, "Effects").
#pragma once
#include "plane.h"

namespace bgone {

// Sets to 1, in place, the pixels of `mask` (0..1) that the subject encloses, and returns them as a
// plane of 0 and 1 of the mask's size, which the matting stage keeps opaque at the output's
// resolution too, whatever the refinement and the levels make of them. What stays as it was: the
// background (pixels below 0.5 connected to the mask's border through pixels below 0.5, 4-connected),
// the clear holes (pixels of at most `clear`), and every pixel within `inset` pixels (the square
// around it) of either: the outer edge and the edges of holes keep their soft matte.
Plane fill_interior(Plane& mask, float clear, int inset);

}  // namespace bgone
