// PNG encoding of a job's result, deflated in parallel.
//
// libvips writes a PNG on one thread: the encode was the longest stage after the inference, while
// the other core idled. Here the rows are split
// into segments of a fixed size, taken by the free cores in turn; each segment is filtered ("up": a
// photo's row resembles the one above) and deflated on its own, ending on a byte boundary (a sync
// flush), and the segments are joined into one zlib stream, their Adler-32 sums combined. A
// segment's data cannot refer back into the previous one: the file is a few hundred bytes larger
// per segment.
//
// At level 1 (the default) the deflate is our own (png_deflate.h); at the other levels it is the
// zlib inside the Node.js binary, which exports it for addons (Node 20, 22 and 24 all do), as does
// the IDAT's CRC. That zlib is looked up at run time, never linked: where it is missing (another
// host process), png_writer_available() is false and image_io.cc encodes with libvips as before.
//
// The rows are asked for as the segments need them (rows(y, out) writes row y, width x bands bytes;
// it is called from several threads at once), so the result's pixels are made row by row next to
// their compression and no composed image is ever held whole.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "metadata.h"
#include "pixels.h"

namespace bgone {

using PngRows = std::function<void(int y, uint8_t* row)>;

bool png_writer_available();
// Encodes an 8-bit image with 1 (grey), 3 (RGB) or 4 (RGBA) bands at level 0-9 (1: our deflate,
// the others zlib's). dpi > 0: a pHYs chunk of round(dpi / 0.0254) pixels per metre on both axes
// (0: none). `meta`'s members as chunks before the IDAT: the ICC profile as iCCP ("ICC profile",
// zlib-compressed), the EXIF block as eXIf, the XMP packet as an uncompressed iTXt of keyword
// "XML:com.adobe.xmp". The result is g_malloc'ed, exactly its size: release it with free_encoded.
Encoded encode_png_rows(int width, int height, int bands, int level, int dpi, const PngRows& rows,
                        const OutputMetadata& meta = OutputMetadata());

}  // namespace bgone
