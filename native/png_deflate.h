// A fast deflate (RFC 1951) encoder for PNG rows filtered with "up", used at pngCompression 1.
//
// zlib at level 1 spent about 20 ms of CPU per 2 MP cut-out, a quarter of all the CPU outside the
// inference. Most of that went into looking for matches at every byte, in a 32 KiB window, for data
// where they are rare: a filtered photo is mostly small residuals that only entropy coding shrinks.
// What repeats in a cut-out are runs: the transparent background (all zeros), flat colours, the
// opaque subject's alpha. So this encoder looks for matches at two distances only, one byte and one
// pixel back, with a few word compares per position instead of a hash chain, and codes literals,
// lengths and those two distances with Huffman codes built per block from the block's own counts.
// A cut-out comes out smaller than zlib's level 1 makes it, in about half its CPU time
// (docs/development.md, "The PNG").
//
// The output is a raw deflate stream: blocks of at most kBlockSymbols symbols (each Huffman-coded,
// or stored when that is smaller), then an empty stored block that ends it on a byte boundary (what
// zlib's sync flush writes), or the stream's final empty block. Anything a standard inflater reads.
#pragma once
#include <cstddef>
#include <cstdint>

#include "buffers.h"

namespace bgone {

class FastDeflate {
 public:
  // pixel_bytes: the distance of the second kind of match (1 to 4). expected_bytes: how much will
  // be added, to size the output once (it grows if ever needed).
  FastDeflate(int pixel_bytes, size_t expected_bytes);

  // Compresses n bytes into whole blocks. Matches do not reach back into an earlier call's bytes.
  void add(const uint8_t* data, size_t n);
  // Ends the output on a byte boundary; with `last`, also ends the deflate stream.
  void finish(bool last);

  Buffer<uint8_t>& output() { return out_; }
  size_t size() const { return pos_; }

  static constexpr int kBlockSymbols = 16384;
  // Deflate's literal/length and distance alphabets (RFC 1951 3.2.5).
  static constexpr int kLitCodes = 286, kDistCodes = 30;

 private:
  void parse_block(const uint8_t* data, size_t n, size_t& i);
  void write_block(const uint8_t* raw, size_t raw_n);
  void write_stored(const uint8_t* raw, size_t raw_n);
  void reserve(size_t bytes);
  void put(uint32_t bits, int count);
  void align();

  int pixel_bytes_;
  Buffer<uint8_t> out_;
  size_t pos_ = 0;
  uint64_t bits_ = 0;
  int bit_count_ = 0;
  Buffer<uint32_t> symbols_;  // literal byte (< 256) or (length << 16 | distance)
  int symbol_count_ = 0;
  uint32_t lit_freq_[kLitCodes] = {};
  uint32_t dist_freq_[kDistCodes] = {};
};

// The Adler-32 checksum (RFC 1950) of n more bytes: the one a zlib stream ends with.
uint32_t adler32(uint32_t adler, const uint8_t* data, size_t n);

}  // namespace bgone
