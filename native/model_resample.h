// The model's input made from an image already decoded in memory (PNG, and JPEG or WebP too small
// to shrink on load, 2 MP among them): stretched to the model's width x height by our own
// separable Lanczos-3 resampler instead of libvips' resize.
//
// Why our own: libvips' resize ran single-threaded at these sizes, on the job's critical path (a
// 0.5 MP upload enlarged to 1024² took it 29 ms). This one is spread over the free cores (for a
// JPEG, behind its decode: below), in fixed point as libvips' is (integer multiply-adds, the same
// integers in every build). It rounds to bytes once where libvips rounded between its two passes;
// on the dev set every score came out a little better (docs/development.md, "The model's input").
#pragma once
#include <cstddef>
#include <cstdint>

#include "pixels.h"

namespace bgone {

class DecodeProgress;

// Resamples interleaved 8-bit pixels (3 bands, or 4 with the alpha flattened on white) to exactly
// width x height, RGB. Edges repeat. Deterministic: the same bytes in every build of the addon.
// Source rows are src_stride bytes apart (0: src_w x bands), so a region of a larger image is read
// in place.
Pixels resample_for_model(const uint8_t* pixels, int src_w, int src_h, int bands, int width, int height, size_t src_stride = 0);

// The same from an image still being decoded on another thread (decode_full with `progress`): each
// source row is read once the decode has it in memory, so the resampling runs behind the decode on
// the core the decode leaves free, instead of after it. On the calling thread alone. The same
// bytes as resample_for_model. Only `region` of the image when given (else all of it). False, with
// `out` incomplete, if the decode ended without the rows (or the region does not fit the image).
bool resample_for_model_behind(DecodeProgress& progress, const Region* region, int width, int height, Pixels& out);

}  // namespace bgone
