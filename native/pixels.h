// The two kinds of image bytes that pass between the pipeline's stages: decoded pixels, and an
// encoded result on its way to JavaScript.
#pragma once
#include <cstddef>
#include <cstdint>

#include "buffers.h"

namespace bgone {

// 8-bit interleaved pixels owned by us.
struct Pixels {
  int width = 0, height = 0, bands = 0;
  Buffer<uint8_t> data;
};

// An encoded image: from alloc_output (buffers.h) when `own`, else libvips' g_malloc. Released with
// free_encoded (image_io.h) once JavaScript lets it go.
struct Encoded {
  void* data = nullptr;
  size_t length = 0;
  bool own = false;
};

// A rectangle of an image (x, y, w, h), in its pixels.
struct Region {
  int x = 0, y = 0, w = 0, h = 0;
};

}  // namespace bgone
