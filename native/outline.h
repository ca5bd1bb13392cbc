// The sticker outline under the subject (outline_color; docs/contract.md, "Effects"): a layer of
// one colour whose alpha is the subject (the finished matte >= 0.5) dilated by a disc of the
// outline's width, its outer edge antialiased or blurred, composed between the subject and the
// background (and its shadow). The dilation is a Euclidean distance transform on a grid coarser
// than the canvas; the distance, sampled bilinearly at each canvas pixel as the compositor writes
// its row, gives the edge at the canvas' own resolution, so it is crisp and round at any size.
#pragma once
#include <vector>

#include "options.h"
#include "pixels.h"
#include "plane.h"

namespace bgone {

class OutlineLayer {
 public:
  // The outline of the subject whose finished matte is `alpha`, placed on the canvas by `at`;
  // o.outline_width > 0.
  OutlineLayer(const JobOptions& o, const Plane& alpha, const Placement& at);

  // Row y of the canvas: the outline's alpha (its colour's alpha included) at each column.
  void row(int y, float* out) const;
  // Its colour, each channel 0..1.
  const float* colour() const { return colour_; }

 private:
  // Its alpha at a distance d (canvas pixels) from the subject's edge.
  float ramp(float d) const;

  int factor_ = 1;  // canvas pixels per cell
  Plane distance_;  // per cell: from its centre to the nearest subject cell's centre, in cells
  // Per row of cells, the columns of cells within the outline's reach ([first, end); empty: none).
  std::vector<int> reach_first_, reach_end_;
  std::vector<Lerp> columns_, rows_;  // where each canvas column and row samples distance_
  float width_ = 0, blur_ = 0, opacity_ = 1, colour_[3] = {0, 0, 0};
  std::vector<float> table_;  // the blurred edge's alpha from ramp_from on, a step of ramp_step
  float ramp_from_ = 0, ramp_step_ = 1;
};

}  // namespace bgone
