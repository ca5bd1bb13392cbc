// Whether a JPEG's entropy-coded data hold every block its frame header announces. libjpeg only
// warns when a scan's data end early (a file cut and closed with an end marker, a frame header
// claiming more rows than the data hold), fills the rest with grey and decodes "successfully";
// libvips' fail_on cannot refuse that warning without refusing harmless ones too (bytes before a
// marker, which real camera files carry). So the scans are walked here, Huffman codes and all, before
// any pixel is decoded.
#pragma once
#include <cstddef>
#include <cstdint>

namespace bgone {

// Throws invalid_image when a scan's data end before its last block, a Huffman code is invalid, or
// a progressive image ends before every coefficient is complete. Returns quietly for a complete
// image, and for forms it does not follow (arithmetic coding, lossless, hierarchical, malformed
// tables or scan parameters, a table neither defined nor standard): libjpeg gives its own verdict
// on those.
void check_jpeg_scans(const uint8_t* data, size_t length);

}  // namespace bgone
