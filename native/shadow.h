// The shadow under the subject (shadow=drop or contact; docs/contract.md, "Effects"): a black
// layer composed between the subject and the background. Its alpha is made on a grid coarser than
// the canvas from the finished matte, and sampled bilinearly while the compositor writes each row,
// so it costs little at any size. The canvas is not enlarged for it: it is clipped at the edge.
#pragma once
#include <vector>

#include "options.h"
#include "pixels.h"
#include "plane.h"

namespace bgone {

class ShadowLayer {
 public:
  // The shadow of the subject whose finished matte is `alpha`, placed on the canvas by `at`, its
  // box on the canvas `subject` (mask >= 0.5; not empty); o.shadow is Drop or Contact.
  ShadowLayer(const JobOptions& o, const Plane& alpha, const Placement& at, const Region& subject);

  // Row y of the canvas: the shadow's alpha (its opacity included) at each of the canvas' columns.
  void row(int y, float* out) const;

 private:
  Plane grid_;                        // the shadow's alpha on the coarse grid, which holds the matte's plane and a margin of 0
  std::vector<Lerp> columns_, rows_;  // where each canvas column and row samples it
};

}  // namespace bgone
