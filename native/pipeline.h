// One background-removal job from uploaded bytes to encoded result, run on a worker thread.
#pragma once
#include <cstddef>
#include <cstdint>

#include "image_io.h"
#include "model.h"
#include "options.h"

namespace bgone {

struct Timings {
  // Header check and full-resolution decode. Where the model's input shrinks on load, the full
  // decode runs on its own thread at the same time as that (preprocess): overlapped, not additive.
  double decode = 0;
  double preprocess = 0;  // the model's input (shrunk on load, or from the full decode) and its tensor
  double inference = 0;   // the model's run itself
  double queue = 0;       // waiting for another job's inference
  // CPU time of the process while the model ran (ms, all threads). With one job at a time, a job's
  // CPU minus this is what it costs outside the inference: the CPU a GPU deployment still pays per
  // image.
  double inference_cpu = 0;
  double resize = 0;   // crop, canvas and output-size resampling of the colour image
  double matting = 0;  // mask -> alpha at output resolution, foreground colours
  double encode = 0;   // compositing the output's pixels and encoding them (for PNG, row by row together)
  // The outline's and the blurred background's layers, made before composing (outline.h,
  // bg_blur.h); their sampling row by row counts as encoding.
  double effects = 0;
  double total = 0;
};

// The subject's box (mask >= 0.5) in the result's pixels.
struct ForegroundBox {
  int top = 0, left = 0, width = 0, height = 0;
};

struct JobResult {
  Encoded encoded;  // owned by the caller (free_encoded)
  Encoded alpha;    // with zip: the alpha as a one-band PNG, owned by the caller; else data is null
  int width = 0, height = 0, channels = 0;
  OutputFormat format = OutputFormat::Png;  // what was encoded (never Auto)
  ForegroundBox foreground;
  // How unsure the model is of its mask, 0..1 (pipeline.cc, uncertainty).
  double uncertainty = 0;
  Timings timings;
};

// `background`: the encoded bytes of a background image (null: none); its errors are PipelineErrors
// whose background() is true. `model`: null only for a job without inference (options.inference).
JobResult run_job(const uint8_t* data, size_t length, const JobOptions& options, Model* model, const uint8_t* background = nullptr,
                  size_t background_length = 0);

// Jobs that reached the inference stage since the process started (every check before it passed).
uint64_t inference_stages();

}  // namespace bgone
