// The input's metadata that a job keeps (options.metadata, options.keep_icc; docs/contract.md,
// "Export and cutout"), parsed from untrusted bytes and written back by bgone's own code.
//
// EXIF: only Copyright (IFD0, 0x8298) and UserComment (Exif IFD, 0x9286) are ever read, every
// offset bounds-checked; an EXIF block that is broken anywhere on the way to them keeps nothing.
// What is written is a minimal TIFF block of our own: Orientation 1 (the pixels are already
// upright), the resolution where the file's density lives in EXIF (WebP, AVIF), and the two tags.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bgone {

// What the output carries besides its pixels; an empty member is not written.
struct OutputMetadata {
  std::vector<uint8_t> xmp;   // an XMP packet (UTF-8 text)
  std::vector<uint8_t> exif;  // a TIFF block (byte order mark first, no "Exif\0\0" prefix)
  std::vector<uint8_t> icc;   // an ICC profile
  bool empty() const { return xmp.empty() && exif.empty() && icc.empty(); }
};

struct ExifSubset {
  bool has_copyright = false, has_comment = false;
  std::vector<uint8_t> copyright;  // the ASCII value's bytes, trailing NULs removed
  std::vector<uint8_t> comment;    // the UNDEFINED value: its 8-byte character code, then the text (UNICODE: UTF-16LE)
};

// Reads the two tags from an EXIF blob (with or without the "Exif\0\0" prefix). A blob that is no
// TIFF block, or whose offsets point outside it on the way to the tags, gives an empty subset.
ExifSubset parse_exif_subset(const uint8_t* data, size_t length);
// The minimal TIFF block (little-endian): Orientation 1, the resolution when dpi > 0, the tags the
// subset has. Empty when the subset has neither tag and dpi is 0.
std::vector<uint8_t> build_exif(const ExifSubset& subset, int dpi);
// A minimal XMP packet with the subset's tags as dc:rights and exif:UserComment; empty when it has neither.
std::vector<uint8_t> build_xmp(const ExifSubset& subset);
// True for a blob that looks like an ICC profile of RGB data (its header's size, signature and
// data colour space): only such a profile is kept, the output being RGB.
bool is_rgb_icc(const uint8_t* data, size_t length);

}  // namespace bgone
