// The one flat options struct that crosses from TypeScript into C++. TypeScript has validated and
// normalised every field (src/options.ts); C++ trusts it but still never crashes on bad image bytes.
#pragma once
#include <cstdint>

namespace bgone {

enum class OutputFormat { Png, Jpeg, Webp };
enum class CropMode { None, Subject, Aspect };

struct JobOptions {
  OutputFormat format = OutputFormat::Png;
  bool alpha_only = false;      // channels=alpha: a one-band grey mask
  bool has_background = false;  // bg_color given
  uint8_t background[4] = {255, 255, 255, 255};  // RGBA
  double max_pixels = 16e6;     // size preset budget; never upscales
  CropMode crop = CropMode::None;
  uint32_t aspect_w = 0, aspect_h = 0;  // crop=W:H
  double padding = 0.1;         // fraction of the subject width, each side, when crop is on
  int max_side = 6000;          // checked from the header before decoding pixels
  bool refine = true;           // edge-aware matte upsampling + foreground colour estimation
  double min_subject = 1e-4;    // share of the mask that must be subject, else foreground_not_found
  // Tuning knobs of the refinement (internal; defaults chosen with bench/quality).
  int guided_radius = 6;        // at the model's resolution
  double guided_eps = 1e-3;
  float levels_low = 0.1f;      // refined alpha below this becomes 0, above levels_high 1, linear between:
                                // removes faint haze (measured with bench/quality)
  float levels_high = 0.9f;
  int quality = 90;             // JPEG / WebP quality
  int png_compression = 3;
};

}  // namespace bgone
