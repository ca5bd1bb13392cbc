// The one flat options struct that crosses from TypeScript into C++. Every field is set by
// read_options (addon.cc) from the object that normaliseOptions (src/lib/options.ts) builds: the
// defaults, the validation and the meaning of each value live there, once. The zero initialisers
// below are only there so that no field is ever indeterminate; none of them is a default.
#pragma once
#include <cstdint>

namespace bgone {

enum class OutputFormat { Png, Jpeg, Webp };
enum class CropMode { None, Subject, Aspect };

struct JobOptions {
  OutputFormat format = OutputFormat::Png;
  bool alpha_only = false;      // channels=alpha: a one-band grey mask
  bool has_background = false;  // bg_color given
  uint8_t background[4] = {};   // RGBA, when has_background
  double max_pixels = 0;        // size preset budget; never upscales
  CropMode crop = CropMode::None;
  uint32_t aspect_w = 0, aspect_h = 0;  // crop=W:H
  double padding = 0;                   // fraction of the subject width, each side, when crop is on
  int max_side = 0;                     // checked from the header before decoding pixels
  bool refine = false;                  // edge-aware matte upsampling + foreground colour estimation
  double min_subject = 0;               // share of the mask that must be subject, else foreground_not_found
  // Tuning knobs of the refinement (values chosen with bench/quality, kept in src/lib/options.ts).
  int guided_radius = 0;  // at the model's resolution
  double guided_eps = 0;
  float levels_low = 0;  // refined alpha below this becomes 0, above levels_high 1, linear between
  float levels_high = 0;
  bool flip_average = false;  // also infer on the mirrored image and average the two mattes
  int inference_size = 0;     // side of the model's square input for this job; used when the model's size is dynamic
  int quality = 0;            // JPEG / WebP quality
  int png_compression = 0;
};

}  // namespace bgone
