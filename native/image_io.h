// Everything libvips does for a job: sniffing, header checks, decoding, resizing and encoding.
// Rules for untrusted input (stack notes): only the JPEG, PNG and WebP loaders are allowed, the
// header is checked before any pixel is decoded, truncated files are errors, and images are never
// decoded to a temporary file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffers.h"
#include "metadata.h"
#include "options.h"
#include "pixels.h"

namespace bgone {

enum class InputFormat { Jpeg, Png, Webp };

void init_vips();
// Throws unsupported_media_type unless the bytes start like a JPEG, PNG or WebP file.
InputFormat sniff_format(const uint8_t* data, size_t length);

struct HeaderInfo {
  int width = 0;  // as displayed, after EXIF orientation
  int height = 0;
  bool alpha = false;  // the file has an alpha channel (its values not read)
};
// Reads only the header; throws image_too_large for a side over max_side, invalid_image if unreadable.
HeaderInfo read_header(const uint8_t* data, size_t length, InputFormat format, int max_side);

// The metadata blobs of the input, read from its header (no pixels decoded): each empty where the
// file has none. Untrusted bytes: parse them with metadata.h.
struct InputMetadata {
  std::vector<uint8_t> xmp, exif, icc;
};
InputMetadata read_metadata(const uint8_t* data, size_t length, InputFormat format);

// Opaque handle on the decoded full-resolution image in memory (auto-rotated, 8-bit sRGB).
struct DecodedImage;
struct DecodedDeleter {
  void operator()(DecodedImage* image) const;
};
using DecodedPtr = std::unique_ptr<DecodedImage, DecodedDeleter>;
class DecodeProgress;
// With `progress`, its buffer and then its rows are published as they are in memory, for a reader
// on another thread (a JPEG's strip by strip; other formats' all at the end), and its end, failed
// or not.
DecodedPtr decode_full(const uint8_t* data, size_t length, InputFormat format, DecodeProgress* progress = nullptr);
int decoded_width(const DecodedImage& image);
int decoded_height(const DecodedImage& image);
// The decoded pixels, interleaved, 3 or 4 bands (the fourth the alpha), rows of width x bands bytes.
int decoded_bands(const DecodedImage& image);
const uint8_t* decoded_pixels(const DecodedImage& image);

// The model input: the image auto-rotated, converted to sRGB, alpha flattened on white, stretched to
// exactly width x height (3 bands), decoded with shrink-on-load where the format has it (JPEG, WebP)...
Pixels decode_for_model(const uint8_t* data, size_t length, InputFormat format, const HeaderInfo& header, int width, int height);
// ...or derived from the full decode (PNG, which has no shrink-on-load, and images too small to
// shrink while still covering the model's input: there the small decode would be a second full one).
// With `region`, only that part of the image (its pixels read in place).
Pixels model_input_from_decoded(const DecodedImage& image, const Region* region, int width, int height);

// A background image (JPEG, PNG or WebP bytes, sniffed and header-checked like an input) scaled to
// cover width x height, centred and cropped: 8-bit sRGB, 3 bands, or 4 with its alpha. With
// `contain` (bg_fit=contain) it is scaled to fit inside instead, centred, and the rest of the
// canvas is transparent: always 4 bands.
Pixels decode_background(const uint8_t* data, size_t length, int max_side, int width, int height, bool contain = false);
// True when decode_for_model decodes fewer pixels than the full image (JPEG at least twice the
// model's side, WebP larger than it).
bool shrinks_on_load(InputFormat format, const HeaderInfo& header, int width, int height);

// Crops the box (x, y, w, h) from the decoded image (extending past its edges by repeating them) and
// resizes it to out_w x out_h. Returns RGB, and the input's alpha (or an empty Pixels if opaque).
// The image's pixels may be taken over (no crop, no resize): it is not to be used afterwards.
void crop_and_resize(DecodedImage& image, int x, int y, int w, int h, int out_w, int out_h, Pixels& rgb, Pixels& alpha);

// The box (x, y, w, h; inside the image, not empty) of the decoded image shrunk by `factor` (at
// least 1): each pixel the mean of its factor x factor pixels (fewer in the last row and column),
// 3 bands, an alpha flattened on white as the model's input is (bg_blur.h). The image's pixels are
// read in place, never taken over.
Pixels shrink_box(const DecodedImage& image, int x, int y, int w, int h, int factor);

// Encodes interleaved 8-bit pixels (1, 3 or 4 bands). The returned buffer is g_malloc'ed: release it
// with free_encoded (it is handed to JavaScript without a copy). options.dpi > 0 is written as the
// file's density: JPEG's JFIF header, PNG's pHYs, WebP's and AVIF's EXIF (the only metadata kept).
// `meta`'s members are written too: JPEG as APP1 segments of ours (EXIF, then XMP), the other
// formats through libvips' savers (its exif-data, xmp-data and icc-profile-data).
Encoded encode(const Pixels& pixels, const JobOptions& options, const OutputMetadata& meta = OutputMetadata());
void free_encoded(void* data, bool own);

}  // namespace bgone
