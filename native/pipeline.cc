#include "pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>

#include "compositor.h"
#include "decode_progress.h"
#include "errors.h"
#include "foreground.h"
#include "guided_filter.h"
#include "jpeg_scan.h"
#include "model_resample.h"
#include "png_writer.h"

namespace bgone {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

// The full-resolution decode on a thread of its own; `ms` gets its time. The future waits for the
// thread when destroyed, also when the caller throws meanwhile: declare `ms` and `progress` before it.
std::future<DecodedPtr> decode_full_async(const uint8_t* data, size_t length, InputFormat format, double& ms,
                                          DecodeProgress* progress = nullptr) {
  return std::async(std::launch::async, [data, length, format, &ms, progress] {
    const auto start = Clock::now();
    DecodedPtr decoded = decode_full(data, length, format, progress);
    ms = ms_since(start);
    return decoded;
  });
}

struct Box {
  int x = 0, y = 0, w = 0, h = 0;
};

struct MaskStats {
  size_t subject_pixels = 0;
  int u0 = 0, v0 = 0, u1 = -1, v1 = -1;  // inclusive bounding box of mask >= 0.5
};

// Clamps the model's output to 0..1 in place and finds the subject in it, on the free cores (it
// is on the critical path, between the inference and the matting). Per row, the clamp and the count
// are two loops without branches, which the compiler vectorises (GCC 12 left them scalar as one);
// only a row with subject in it is scanned again, from each end to the subject's first pixel. One
// loop with a branch per pixel ran scalar. A NaN from the model counts as background (0).
MaskStats clamp_and_analyse(Plane& mask) {
  MaskStats s;
  s.u0 = mask.width;
  s.v0 = mask.height;
  std::mutex merge;
  parallel_rows(mask.height, [&](int first, int end) {
    MaskStats b;
    b.u0 = mask.width;
    b.v0 = mask.height;
    const int w = mask.width;
    for (int y = first; y < end; ++y) {
      float* row = mask.row(y);
      for (int x = 0; x < w; ++x) {
        const float v = row[x] >= 0.f ? row[x] : 0.f;  // NaN fails the test too
        row[x] = v <= 1.f ? v : 1.f;
      }
      int count = 0;
      for (int x = 0; x < w; ++x) count += row[x] >= 0.5f ? 1 : 0;
      if (count == 0) continue;
      b.subject_pixels += count;
      int left = 0, right = w - 1;
      while (row[left] < 0.5f) ++left;
      while (row[right] < 0.5f) --right;
      b.u0 = std::min(b.u0, left);
      b.u1 = std::max(b.u1, right);
      b.v0 = std::min(b.v0, y);
      b.v1 = std::max(b.v1, y);
    }
    const std::lock_guard<std::mutex> lock(merge);
    s.subject_pixels += b.subject_pixels;
    s.u0 = std::min(s.u0, b.u0);
    s.u1 = std::max(s.u1, b.u1);
    s.v0 = std::min(s.v0, b.v0);
    s.v1 = std::max(s.v1, b.v1);
  });
  return s;
}

// The crop box in image pixels (may reach past the image), per docs/contract.md: the subject's
// bounding box plus padding (a fraction of the subject width) on every side; for W:H, the smallest
// W:H box holding the padded subject, centred on it.
Box crop_box(const JobOptions& o, const MaskStats& s, int image_w, int image_h, int mask_w, int mask_h) {
  if (o.crop == CropMode::None) return {0, 0, image_w, image_h};
  const double sx = static_cast<double>(image_w) / mask_w, sy = static_cast<double>(image_h) / mask_h;
  // The subject's box never reaches past the image (rounding of the mask's scale could add a pixel
  // for a mask size that is not a power of two): src/lib/crop-cap.ts bounds the crop box in advance
  // from the image's size, and relies on this.
  const double x0 = std::floor(s.u0 * sx), x1 = std::min<double>(image_w, std::ceil((s.u1 + 1) * sx));
  const double y0 = std::floor(s.v0 * sy), y1 = std::min<double>(image_h, std::ceil((s.v1 + 1) * sy));
  const double pad = std::round(o.padding * (x1 - x0));
  double bx0 = x0 - pad, bx1 = x1 + pad, by0 = y0 - pad, by1 = y1 + pad;
  if (o.crop == CropMode::Aspect) {
    const double ratio = static_cast<double>(o.aspect_w) / o.aspect_h;
    double w = bx1 - bx0, h = by1 - by0;
    if (w / h < ratio) {
      w = std::ceil(h * ratio);
    } else {
      h = std::ceil(w / ratio);
    }
    const double cx = (bx0 + bx1) / 2, cy = (by0 + by1) / 2;
    bx0 = std::round(cx - w / 2);
    by0 = std::round(cy - h / 2);
    bx1 = bx0 + w;
    by1 = by0 + h;
  }
  Box b;
  b.x = static_cast<int>(bx0);
  b.y = static_cast<int>(by0);
  b.w = std::max(1, static_cast<int>(bx1 - bx0));
  b.h = std::max(1, static_cast<int>(by1 - by0));
  return b;
}

// Share of each output column (or row) that lies inside the image: outside, alpha is 0.
std::vector<float> coverage(int out_n, int box_start, int box_n, int image_n) {
  std::vector<float> cov(out_n);
  const double step = static_cast<double>(box_n) / out_n;
  for (int i = 0; i < out_n; ++i) {
    const double a = box_start + i * step, b = a + step;
    const double inside = std::max(0.0, std::min(b, static_cast<double>(image_n)) - std::max(a, 0.0));
    cov[i] = static_cast<float>(std::clamp(inside / step, 0.0, 1.0));
  }
  return cov;
}

// The side of the grid the guided filter is fitted on (see run_job).
constexpr double kFitSide = 256;

// Test-time augmentation (the flipAverage knob, off by default: see src/lib/options.ts): mirrors the
// tensor in place, runs the model again and folds the mirrored answer into `mask`. Returns the run's cost.
Model::RunCost flip_average(Model& model, Buffer<float>& tensor, int w, int h, Plane& mask) {
  for (size_t row = 0; row < static_cast<size_t>(h) * 3; ++row) std::reverse(tensor.begin() + row * w, tensor.begin() + (row + 1) * w);
  Plane mirrored(w, h, Unfilled{});
  const Model::RunCost cost = model.run(tensor, w, h, mirrored.v);
  for (int y = 0; y < h; ++y) {
    float* out = mask.row(y);
    const float* m = mirrored.row(y);
    for (int x = 0; x < w; ++x) out[x] = 0.5f * (out[x] + m[w - 1 - x]);
  }
  return cost;
}

// The stages of one job, in order: decode_stage, tensor_stage, inference_stage, crop_stage,
// matting_stage, encode_stage. run_job (below) strings them together and times them.

// What the decode hands on: the model's input (in_w x in_h, RGB) and the full-resolution image.
struct DecodedInputs {
  Pixels small;
  DecodedPtr full;
  // From here on the time counts as preprocessing (the model's input), not as the full decode.
  Clock::time_point preprocess_from;
};

// The model's input and the full image, each made the cheapest way the format and the free cores
// allow. A JPEG's scan data are walked for an early end (jpeg_scan.h) while a decode runs.
DecodedInputs decode_stage(const uint8_t* data, size_t length, InputFormat format, const HeaderInfo& header, int in_w, int in_h,
                           Timings& t) {
  DecodedInputs in;
  const bool shrinks = shrinks_on_load(format, header, in_w, in_h);
  // Beside another job's inference (no core free) the decode and the resampling take turns on this
  // thread, as below: two threads beside the model's would oversubscribe the cores (parallel.h).
  if (format == InputFormat::Jpeg && !shrinks && free_cores() >= 2) {
    // A JPEG under twice the model's side (2 MP and less): a small decode would decode every pixel
    // too, so it is decoded once, on a thread of its own that publishes strip after strip, and the
    // model's input is resampled from each strip on this thread as soon as it is in memory.
    in.preprocess_from = Clock::now();
    double full_ms = 0;
    DecodeProgress progress;
    std::future<DecodedPtr> full = decode_full_async(data, length, format, full_ms, &progress);
    check_jpeg_scans(data, length);
    const bool resampled = resample_for_model_behind(progress, in_w, in_h, in.small);
    in.full = full.get();  // the decode's own error first, if it failed
    if (!resampled) throw PipelineError(ErrorCode::Internal, "the decode ended before the model's input was read");
    t.decode += full_ms;
  } else if (!shrinks) {
    // PNG, a WebP no larger than the model's input, or a small JPEG beside another job's inference:
    // decoded once, and the model's input derived from it on the free cores (a PNG's decode has
    // them all: libvips' workers).
    const auto step = Clock::now();
    if (format == InputFormat::Jpeg) check_jpeg_scans(data, length);
    in.full = decode_full(data, length, format);
    t.decode += ms_since(step);
    in.preprocess_from = Clock::now();
    in.small = model_input_from_decoded(*in.full, in_w, in_h);
  } else {
    // Two decodes of the same bytes at once, one per core: the full resolution on a thread of its
    // own, the model's input (shrunk on load) on this one. Both end before the inference, which
    // then has the cores to itself: beside it, the full decode slowed the model's threads by more
    // than its own time.
    in.preprocess_from = Clock::now();
    double full_ms = 0;
    std::future<DecodedPtr> full = decode_full_async(data, length, format, full_ms);
    in.small = decode_for_model(data, length, format, header, in_w, in_h);
    if (format == InputFormat::Jpeg) check_jpeg_scans(data, length);
    in.full = full.get();
    t.decode += full_ms;
  }
  return in;
}

// The model's input as the model reads it: planes, normalised per channel. The arithmetic is that
// of a table of the 256 values per channel (the same float operations, so the same bits), as a
// loop per channel the compiler vectorises, on the free cores (before the inference, all of them).
Buffer<float> tensor_stage(const Pixels& small, const ModelSpec& spec, int in_w, int in_h) {
  const size_t plane = static_cast<size_t>(in_w) * in_h;
  Buffer<float> tensor(plane * 3);
  parallel_rows(in_h, [&](int first, int end) {
    const size_t from = static_cast<size_t>(first) * in_w, to = static_cast<size_t>(end) * in_w;
    const uint8_t* src = small.data.data();
    for (int c = 0; c < 3; ++c) {
      const float mean = spec.mean[c], sd = spec.std[c];
      float* dst = tensor.data() + c * plane;
      for (size_t i = from; i < to; ++i) dst[i] = (static_cast<float>(src[i * 3 + c]) - mean) / sd;
    }
  });
  return tensor;
}

// The model's mask at its input's size (with the mirrored run folded in when asked); the tensor is
// released as soon as the model is done with it.
Plane inference_stage(Model& model, Buffer<float>& tensor, int in_w, int in_h, bool flip, Timings& t) {
  Plane mask(in_w, in_h, Unfilled{});
  const auto step = Clock::now();
  Model::RunCost cost = model.run(tensor, in_w, in_h, mask.v);
  if (flip) {
    const Model::RunCost mirrored = flip_average(model, tensor, in_w, in_h, mask);
    cost.waited += mirrored.waited;
    cost.cpu += mirrored.cpu;
  }
  t.queue = cost.waited;
  t.inference = ms_since(step) - t.queue;
  t.inference_cpu = cost.cpu;
  Buffer<float>().swap(tensor);
  return mask;
}

// The part of the image the output shows (the crop, then the size preset, never upscaling), cut
// out of the full image and resized to the output's size. The full image is released.
struct Cut {
  Box box;
  int out_w = 0, out_h = 0;
  Pixels rgb, input_alpha;
};
Cut crop_stage(const JobOptions& o, const MaskStats& stats, DecodedPtr& full, int image_w, int image_h, int in_w, int in_h, Timings& t) {
  const auto step = Clock::now();
  Cut cut;
  cut.box = crop_box(o, stats, image_w, image_h, in_w, in_h);
  const double box_pixels = static_cast<double>(cut.box.w) * cut.box.h;
  const double scale = std::min(1.0, std::sqrt(o.max_pixels / box_pixels));
  cut.out_w = std::max(1, static_cast<int>(std::floor(cut.box.w * scale + 1e-9)));
  cut.out_h = std::max(1, static_cast<int>(std::floor(cut.box.h * scale + 1e-9)));
  crop_and_resize(*full, cut.box.x, cut.box.y, cut.box.w, cut.box.h, cut.out_w, cut.out_h, cut.rgb, cut.input_alpha);
  full.reset();
  t.resize = ms_since(step);
  return cut;
}

// The alpha at the output's resolution from the model's mask (the guided filter with the model's
// input as its guide, or a plain resampling without refine), with levels, the share of each pixel
// inside the image and the upload's own alpha applied; and, for a colour output, the foreground
// colours estimated in place in cut.rgb.
Plane matting_stage(const JobOptions& o, const Plane& mask, const Pixels& small, Cut& cut, int image_w, int image_h, Timings& t) {
  const auto step = Clock::now();
  const Box& box = cut.box;
  const int out_w = cut.out_w, out_h = cut.out_h, in_w = mask.width, in_h = mask.height;
  // Output pixel centre -> mask pixel centre, per axis.
  const double kx = static_cast<double>(in_w) / image_w, ky = static_cast<double>(in_h) / image_h;
  const AxisMap mx{static_cast<double>(box.w) / out_w * kx, (box.x + 0.5 * box.w / out_w) * kx - 0.5};
  const AxisMap my{static_cast<double>(box.h) / out_h * ky, (box.y + 0.5 * box.h / out_h) * ky - 0.5};
  const std::vector<float> cov_x = coverage(out_w, box.x, box.w, image_w);
  const std::vector<float> cov_y = coverage(out_h, box.y, box.h, image_h);
  const bool levels = o.refine && o.levels_low < o.levels_high;
  const float level_scale = levels ? 1.f / (o.levels_high - o.levels_low) : 1.f;
  // Levels, then the share of each pixel inside the image, then the upload's own alpha: each a
  // loop of its own, without branches, which the compiler vectorises (one loop with them ran
  // scalar). A share of exactly 1 everywhere (no crop past the image) would multiply by 1, and is
  // skipped.
  const bool whole_columns = std::all_of(cov_x.begin(), cov_x.end(), [](float c) { return c == 1.f; });
  const float low = o.levels_low;
  const Pixels& input_alpha = cut.input_alpha;
  auto finish = [&](int y, float* row) {
    if (levels) {
      for (int x = 0; x < out_w; ++x) {
        const float a = std::min(std::max(row[x], 0.f), 1.f);
        row[x] = std::min(std::max((a - low) * level_scale, 0.f), 1.f);
      }
    } else {
      for (int x = 0; x < out_w; ++x) row[x] = std::min(std::max(row[x], 0.f), 1.f);
    }
    const float cy = cov_y[y];
    if (!whole_columns || cy != 1.f) {
      for (int x = 0; x < out_w; ++x) row[x] *= cov_x[x] * cy;
    }
    if (input_alpha.bands) {  // what was transparent in the upload stays so
      const uint8_t* in_alpha = input_alpha.data.data() + static_cast<size_t>(y) * out_w;
      for (int x = 0; x < out_w; ++x) row[x] *= in_alpha[x] / 255.f;
    }
  };
  Plane alpha;
  if (o.refine) {
    // Fitted on a grid of about kFitSide (256² for a 1024² inference; the radius, in the model's
    // pixels, scaled with it): 16x less work than at the model's resolution, for the same scores
    // (docs/quality.md).
    const int factor = std::max(1, static_cast<int>(std::lround(std::max(in_w, in_h) / kFitSide)));
    const int radius = std::max(1, static_cast<int>(std::lround(static_cast<double>(o.guided_radius) / factor)));
    const GuidedCoefficients k = fit_guided_coarse(small.data.data(), mask, factor, radius, o.guided_eps);
    const AxisMap hx{mx.scale / factor, (mx.offset + 0.5) / factor - 0.5}, hy{my.scale / factor, (my.offset + 0.5) / factor - 0.5};
    // finish (above): with levels, everything up to levels_low ends as 0 and from levels_high as 1.
    const FinishFlat flat = levels ? FinishFlat{o.levels_low, o.levels_high} : FinishFlat{};
    if (o.alpha_only) {
      alpha = apply_guided(k, cut.rgb.data.data(), out_w, out_h, hx, hy, flat, finish);
    } else {
      // The foreground estimate's inputs are taken from each row as it is finished.
      ForegroundInputs inputs(out_w, out_h);
      const uint8_t* pixels = cut.rgb.data.data();
      auto finish_and_take = [&](int y, float* row) {
        finish(y, row);
        inputs.add_row(y, pixels + static_cast<size_t>(y) * out_w * 3, row);
      };
      alpha = apply_guided(k, pixels, out_w, out_h, hx, hy, flat, finish_and_take, inputs.row_group());
      estimate_foreground(cut.rgb.data, alpha, inputs);
    }
  } else {
    alpha = resample_plane(mask, out_w, out_h, mx, my);
    parallel_rows(out_h, [&](int first, int end) {
      for (int y = first; y < end; ++y) finish(y, alpha.row(y));
    });
  }
  t.matting = ms_since(step);
  return alpha;
}

// The output's pixels composed and encoded: for PNG row by row inside the writer, so composing
// counts as encoding.
void encode_stage(const JobOptions& o, const Plane& alpha, const Buffer<uint8_t>& fg, JobResult& result) {
  const auto step = Clock::now();
  const Composer composer(o, alpha, fg);
  if (o.format == OutputFormat::Png && png_writer_available()) {
    result.encoded = encode_png_rows(composer.width(), composer.height(), composer.bands(), o.png_compression,
                                     [&composer](int y, uint8_t* row) { composer.row(y, row); });
  } else {
    result.encoded = encode(composer.whole(), o);
  }
  result.timings.encode = ms_since(step);
  result.width = composer.width();
  result.height = composer.height();
  result.channels = composer.bands();
}

}  // namespace

JobResult run_job(const uint8_t* data, size_t length, const JobOptions& o, Model& model) {
  const auto start = Clock::now();
  JobResult result;
  Timings& t = result.timings;

  const auto header_start = Clock::now();
  const InputFormat format = sniff_format(data, length);
  const HeaderInfo header = read_header(data, length, format, o.max_side);
  t.decode += ms_since(header_start);

  // The inference size is chosen per job in TypeScript (smaller for small outputs) when the model
  // takes any size; a model with a fixed input always gets its own.
  const ModelSpec& spec = model.spec();
  const int in_w = spec.dynamic_size ? o.inference_size : spec.width;
  const int in_h = spec.dynamic_size ? o.inference_size : spec.height;

  DecodedInputs in = decode_stage(data, length, format, header, in_w, in_h, t);
  Buffer<float> tensor = tensor_stage(in.small, spec, in_w, in_h);
  t.preprocess = ms_since(in.preprocess_from);

  Plane mask = inference_stage(model, tensor, in_w, in_h, o.flip_average, t);
  const int image_w = decoded_width(*in.full), image_h = decoded_height(*in.full);
  if (image_w != header.width || image_h != header.height)
    throw PipelineError(ErrorCode::InvalidImage, "decoded size differs from the header");
  const MaskStats stats = clamp_and_analyse(mask);
  if (stats.subject_pixels < std::max<double>(1.0, o.min_subject * static_cast<double>(static_cast<size_t>(in_w) * in_h))) {
    throw PipelineError(ErrorCode::ForegroundNotFound, "no subject in the mask");
  }

  Cut cut = crop_stage(o, stats, in.full, image_w, image_h, in_w, in_h, t);
  const Plane alpha = matting_stage(o, mask, in.small, cut, image_w, image_h, t);
  Buffer<uint8_t> fg;
  if (!o.alpha_only) fg = std::move(cut.rgb.data);
  encode_stage(o, alpha, fg, result);
  t.total = ms_since(start);
  return result;
}

}  // namespace bgone
