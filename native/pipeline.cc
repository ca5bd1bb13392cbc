#include "pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>

#include "bg_blur.h"
#include "compositor.h"
#include "decode_progress.h"
#include "despill.h"
#include "errors.h"
#include "foreground.h"
#include "guided_filter.h"
#include "interior.h"
#include "jpeg_scan.h"
#include "metadata.h"
#include "model_resample.h"
#include "outline.h"
#include "pixels.h"
#include "png_writer.h"
#include "shadow.h"

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

// Below this the mask is background the model is sure of; between it and 0.5, faint (uncertainty).
constexpr float kFaintAbove = 0.1f;

struct MaskStats {
  size_t subject_pixels = 0;
  size_t faint_pixels = 0;               // 0.1 < mask < 0.5: what the model is least sure of (uncertainty, below)
  int u0 = 0, v0 = 0, u1 = -1, v1 = -1;  // inclusive bounding box of mask >= 0.5

  // Adds a row's `count` subject pixels, from column `left` to `right`, on row `y`.
  void add_row(int count, int left, int right, int y) {
    subject_pixels += count;
    u0 = std::min(u0, left);
    u1 = std::max(u1, right);
    v0 = std::min(v0, y);
    v1 = std::max(v1, y);
  }
  // Adds the counts and the box of `part` (another band of rows) to these.
  void merge(const MaskStats& part) {
    subject_pixels += part.subject_pixels;
    faint_pixels += part.faint_pixels;
    u0 = std::min(u0, part.u0);
    u1 = std::max(u1, part.u1);
    v0 = std::min(v0, part.v0);
    v1 = std::max(v1, part.v1);
  }
};

// Finds the subject in the mask (in 0..1: Model::infer's), on the free cores (it is on the critical
// path, between the inference and the matting). Per row, the counts are loops without branches,
// which the compiler vectorises (GCC 12 left them scalar as one); only a row with subject in it is
// scanned again, from each end to the subject's first pixel. One loop with a branch per pixel ran
// scalar.
MaskStats analyse_mask(const Plane& mask) {
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
      const float* row = mask.row(y);
      int faint = 0;
      for (int x = 0; x < w; ++x) faint += (row[x] > kFaintAbove) & (row[x] < 0.5f);
      b.faint_pixels += faint;
      int count = 0;
      for (int x = 0; x < w; ++x) count += row[x] >= 0.5f ? 1 : 0;
      if (count == 0) continue;
      int left = 0, right = w - 1;
      while (row[left] < 0.5f) ++left;
      while (row[right] < 0.5f) --right;
      b.add_row(count, left, right, y);
    }
    const std::lock_guard<std::mutex> lock(merge);
    s.merge(b);
  });
  return s;
}

// How unsure the model is of its mask (0..1; docs/contract.md, "Uncertainty"): the faint pixels
// (0.1 < mask < 0.5) against the subject's (mask >= 0.5), r = faint / subject, squashed as
// r / (r + kUncertainHalf): 0.5 where the faint pixels are a tenth of the subject. Over the dev
// set its rank correlation with each photo's error (1 - IoU) is about 0.77 (docs/quality.md);
// faint pixels predicted the error better than the whole band from 0.1 to 0.9, whose upper half
// is mostly the soft inside of subjects that are right.
constexpr double kUncertainHalf = 0.1;
double uncertainty(const MaskStats& s) {
  if (s.subject_pixels == 0) return 1;
  const double r = static_cast<double>(s.faint_pixels) / s.subject_pixels;
  return r / (r + kUncertainHalf);
}

// The subject's box in image pixels (mask >= 0.5), from the mask over `region` of the image.
struct SubjectBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // x1, y1 exclusive
};
SubjectBox subject_box(const MaskStats& s, const Region& region, int mask_w, int mask_h) {
  const double sx = static_cast<double>(region.w) / mask_w, sy = static_cast<double>(region.h) / mask_h;
  // The subject's box never reaches past the region (rounding of the mask's scale could add a pixel
  // for a mask size that is not a power of two): src/lib/crop-cap.ts bounds the crop box in advance
  // from the image's size, and relies on this.
  SubjectBox b;
  b.x0 = region.x + std::floor(s.u0 * sx);
  b.x1 = std::min<double>(region.x + region.w, region.x + std::ceil((s.u1 + 1) * sx));
  b.y0 = region.y + std::floor(s.v0 * sy);
  b.y1 = std::min<double>(region.y + region.h, region.y + std::ceil((s.v1 + 1) * sy));
  return b;
}

// The crop box in image pixels (may reach past the image), per docs/contract.md: the subject's
// bounding box plus a margin on each side (a share of the subject width plus pixels); for W:H, the
// smallest W:H box holding the padded subject, centred on it.
Box crop_box(const JobOptions& o, const SubjectBox& s, int image_w, int image_h) {
  if (o.crop == CropMode::None) return {0, 0, image_w, image_h};
  const double x0 = s.x0, x1 = s.x1, y0 = s.y0, y1 = s.y1;
  double pad[4];  // top, right, bottom, left
  for (int i = 0; i < 4; ++i) pad[i] = std::round(o.padding_share[i] * (x1 - x0)) + o.padding_px[i];
  double bx0 = x0 - pad[3], bx1 = x1 + pad[1], by0 = y0 - pad[0], by1 = y1 + pad[2];
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

// Share of each output column (or row) that lies inside [v0, v1) of the image: outside, alpha is 0.
std::vector<float> coverage(int out_n, int box_start, int box_n, double v0, double v1) {
  std::vector<float> cov(out_n);
  const double step = static_cast<double>(box_n) / out_n;
  for (int i = 0; i < out_n; ++i) {
    const double a = box_start + i * step, b = a + step;
    const double inside = std::max(0.0, std::min(b, v1) - std::max(a, v0));
    cov[i] = static_cast<float>(std::clamp(inside / step, 0.0, 1.0));
  }
  return cov;
}

// The canvas and what lies where on it.
//
// The output is a canvas of canvas_w x canvas_h pixels, and per axis one affine map takes a canvas
// pixel to image coordinates: image = a + canvas * k (k image pixels per canvas pixel). The frame
// is the whole image, or the crop box. The canvas is the exact size asked for, or else the frame
// scaled down by the size preset. Without scale, the frame fills the canvas (the size preset) or
// is fitted inside the exact canvas (contain, upscaling allowed), placed by position (null:
// centred). With scale, k makes the subject's box (mask >= 0.5, no margin) take that share of the
// canvas on its larger side, placed by position, or with its centre where it was in the frame.
// What shows image pixels is the visible interval of each axis: the image, within the region of
// interest, and without scale within the frame; elsewhere alpha is 0. Only the canvas' rectangle
// that shows visible pixels (the content) is resampled, matted and estimated: an integer box of
// the image resized to the content's size, the composer placing it on the canvas. The box is the
// map rounded to whole image pixels (at most half a pixel off). Without roi, scale or exact
// canvas the content is the whole canvas and the box the frame itself, exactly.
struct Layout {
  int canvas_w = 0, canvas_h = 0;
  Box box;                                    // image pixels resized to the content
  int x = 0, y = 0;                           // the content's place on the canvas
  int out_w = 0, out_h = 0;                   // the content's size
  double vx0 = 0, vx1 = 0, vy0 = 0, vy1 = 0;  // the visible interval of each axis, in image pixels
};

// One axis of the map, clipped to what is visible: the canvas' [c0, c0 + cn) shows the image's
// [b0, b0 + bn).
struct AxisPlace {
  int c0 = 0, cn = 1, b0 = 0, bn = 1;
};
AxisPlace place_axis(double a, double k, int canvas_n, double v0, double v1) {
  AxisPlace p;
  const int c0 = static_cast<int>(std::clamp(std::floor((v0 - a) / k + 1e-9), 0.0, static_cast<double>(canvas_n)));
  const int c1 = static_cast<int>(std::clamp(std::ceil((v1 - a) / k - 1e-9), 0.0, static_cast<double>(canvas_n)));
  if (c1 <= c0) {  // nothing visible: one pixel, whose coverage is 0
    p.b0 = static_cast<int>(std::clamp(std::floor(a), -1e6, 1e6));
    p.bn = std::max(1, static_cast<int>(std::lround(std::min(k, 1e6))));
    return p;
  }
  p.c0 = c0;
  p.cn = c1 - c0;
  p.b0 = static_cast<int>(std::lround(a + c0 * k));
  p.bn = std::max(1, static_cast<int>(std::lround(a + c1 * k)) - p.b0);
  return p;
}

// The placement layout (JobOptions::placement): the canvas, its target area, the reference box
// fitted in it and placed, as the canvas' map of the image. The subject is cut on a side where its
// box reaches the region's edge.
Layout place(const JobOptions& o, const SubjectBox& subject, const Region& region) {
  Layout l;
  const double sw = subject.x1 - subject.x0, sh = subject.y1 - subject.y0;
  double cw = o.canvas_w, ch = o.canvas_h;
  if (o.placement != PlacementCanvas::Canvas) {
    cw = o.placement == PlacementCanvas::Original ? region.w : std::ceil(sw);
    ch = o.placement == PlacementCanvas::Original ? region.h : std::ceil(sh);
    double shrink = std::min(1.0, std::sqrt(o.max_pixels / (cw * ch)));
    if (o.max_canvas_w > 0) shrink = std::min(shrink, o.max_canvas_w / cw);
    if (o.max_canvas_h > 0) shrink = std::min(shrink, o.max_canvas_h / ch);
    cw = std::max(1.0, std::floor(cw * shrink + 1e-9));
    ch = std::max(1.0, std::floor(ch * shrink + 1e-9));
  }
  l.canvas_w = static_cast<int>(cw);
  l.canvas_h = static_cast<int>(ch);
  // The margin box, then the target area inside it (x0, y0, x1, y1 on the canvas).
  const double m_top = o.margin_share[0] * ch + o.margin_px[0], m_right = o.margin_share[1] * cw + o.margin_px[1];
  const double m_bottom = o.margin_share[2] * ch + o.margin_px[2], m_left = o.margin_share[3] * cw + o.margin_px[3];
  const double mx0 = m_left, my0 = m_top, mx1 = std::max(mx0 + 1, cw - m_right), my1 = std::max(my0 + 1, ch - m_bottom);
  const double mw = mx1 - mx0, mh = my1 - my0;
  double tx0 = mx0 + o.area_share[3] * mw + o.area_px[3], tx1 = mx1 - (o.area_share[1] * mw + o.area_px[1]);
  double ty0 = my0 + o.area_share[0] * mh + o.area_px[0], ty1 = my1 - (o.area_share[2] * mh + o.area_px[2]);
  double px = o.has_position ? o.position[0] : 0.5, py = o.has_position ? o.position[1] : 0.5;
  if (!o.reference_image) {
    const bool left = subject.x0 <= region.x, right = subject.x1 >= region.x + region.w;
    const bool top = subject.y0 <= region.y, bottom = subject.y1 >= region.y + region.h;
    if (o.snap_x && (left || right)) {
      if (left) tx0 = mx0;
      if (right) tx1 = mx1;
      px = left && right ? 0.5 : left ? 0 : 1;
    }
    if (o.snap_y && (top || bottom)) {
      if (top) ty0 = my0;
      if (bottom) ty1 = my1;
      py = top && bottom ? 0.5 : top ? 0 : 1;
    }
  }
  if (tx1 - tx0 < 1) tx1 = tx0 + 1;
  if (ty1 - ty0 < 1) ty1 = ty0 + 1;
  const double tw = tx1 - tx0, th = ty1 - ty0;
  const double bx = o.reference_image ? region.x : subject.x0, by = o.reference_image ? region.y : subject.y0;
  const double bw = std::max(1.0, o.reference_image ? region.w : sw), bh = std::max(1.0, o.reference_image ? region.h : sh);
  const double s = o.cover ? std::max(tw / bw, th / bh) : std::min(tw / bw, th / bh);  // canvas pixels per image pixel
  const double ax = bx - (tx0 + px * (tw - bw * s)) / s, ay = by - (ty0 + py * (th - bh * s)) / s;
  l.vx0 = region.x;
  l.vx1 = region.x + region.w;
  l.vy0 = region.y;
  l.vy1 = region.y + region.h;
  const AxisPlace ax_place = place_axis(ax, 1 / s, l.canvas_w, l.vx0, l.vx1);
  const AxisPlace ay_place = place_axis(ay, 1 / s, l.canvas_h, l.vy0, l.vy1);
  l.box = {ax_place.b0, ay_place.b0, ax_place.bn, ay_place.bn};
  l.x = ax_place.c0;
  l.y = ay_place.c0;
  l.out_w = ax_place.cn;
  l.out_h = ay_place.cn;
  return l;
}

Layout layout(const JobOptions& o, const SubjectBox& subject, const Region& region, int image_w, int image_h) {
  if (o.placement != PlacementCanvas::None) return place(o, subject, region);
  Layout l;
  const Box frame = crop_box(o, subject, image_w, image_h);
  const bool exact = o.canvas_w > 0;
  if (exact) {
    l.canvas_w = o.canvas_w;
    l.canvas_h = o.canvas_h;
  } else {
    const double box_pixels = static_cast<double>(frame.w) * frame.h;
    const double scale = std::min(1.0, std::sqrt(o.max_pixels / box_pixels));
    l.canvas_w = std::max(1, static_cast<int>(std::floor(frame.w * scale + 1e-9)));
    l.canvas_h = std::max(1, static_cast<int>(std::floor(frame.h * scale + 1e-9)));
  }
  l.vx0 = 0;
  l.vx1 = image_w;
  l.vy0 = 0;
  l.vy1 = image_h;
  if (!o.has_roi && o.scale == 0 && !exact) {
    l.box = frame;
    l.out_w = l.canvas_w;
    l.out_h = l.canvas_h;
    return l;
  }
  l.vx0 = region.x;
  l.vx1 = region.x + region.w;
  l.vy0 = region.y;
  l.vy1 = region.y + region.h;
  const double cw = l.canvas_w, ch = l.canvas_h;
  double ax, ay, kx, ky;
  if (o.scale > 0) {
    const double sw = subject.x1 - subject.x0, sh = subject.y1 - subject.y0;
    const double s = o.scale / std::max(sw / cw, sh / ch);  // canvas pixels per image pixel
    kx = ky = 1 / s;
    if (o.has_position) {
      ax = subject.x0 - o.position[0] * (cw - sw * s) / s;
      ay = subject.y0 - o.position[1] * (ch - sh * s) / s;
    } else {  // the subject's centre where it was in the frame
      const double mx = (subject.x0 + subject.x1) / 2, my = (subject.y0 + subject.y1) / 2;
      ax = mx - (mx - frame.x) / frame.w * cw / s;
      ay = my - (my - frame.y) / frame.h * ch / s;
    }
  } else {
    l.vx0 = std::max<double>(l.vx0, frame.x);
    l.vx1 = std::min<double>(l.vx1, frame.x + frame.w);
    l.vy0 = std::max<double>(l.vy0, frame.y);
    l.vy1 = std::min<double>(l.vy1, frame.y + frame.h);
    if (exact) {
      const double s = std::min(cw / frame.w, ch / frame.h);
      const double px = o.has_position ? o.position[0] : 0.5, py = o.has_position ? o.position[1] : 0.5;
      kx = ky = 1 / s;
      ax = frame.x - px * (cw - frame.w * s) / s;
      ay = frame.y - py * (ch - frame.h * s) / s;
    } else {
      kx = frame.w / cw;
      ky = frame.h / ch;
      ax = frame.x;
      ay = frame.y;
    }
  }
  const AxisPlace px = place_axis(ax, kx, l.canvas_w, l.vx0, l.vx1);
  const AxisPlace py = place_axis(ay, ky, l.canvas_h, l.vy0, l.vy1);
  l.box = {px.b0, py.b0, px.bn, py.bn};
  l.x = px.c0;
  l.y = py.c0;
  l.out_w = px.cn;
  l.out_h = py.cn;
  return l;
}

// The side of the grid the guided filter is fitted on (see run_job).
constexpr double kFitSide = 256;

// The stages of one job, in order: decode_stage, inference_stage, [bg_blur_stage], crop_stage,
// matting_stage, [despill_stage], [outline_stage], encode_stage (the bracketed ones only when the
// job asks for them). run_job (below) strings them together and times them.

// What the decode hands on: the model's input (in_w x in_h, RGB) and the full-resolution image.
struct DecodedInputs {
  Pixels small;
  DecodedPtr full;
  // From here on the time counts as preprocessing (the model's input), not as the full decode.
  Clock::time_point preprocess_from;
};

// The model's input and the full image, each made the cheapest way the format and the free cores
// allow. A JPEG's scan data are walked for an early end (jpeg_scan.h) while a decode runs.
// With a region of interest (`roi`), the model's input is made from that region of the full decode.
DecodedInputs decode_stage(const uint8_t* data, size_t length, InputFormat format, const HeaderInfo& header, const Region* roi, int in_w,
                           int in_h, Timings& t) {
  DecodedInputs in;
  const bool shrinks = roi == nullptr && shrinks_on_load(format, header, in_w, in_h);
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
    const bool resampled = resample_for_model_behind(progress, roi, in_w, in_h, in.small);
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
    in.small = model_input_from_decoded(*in.full, roi, in_w, in_h);
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

// The model's answer for the mirrored image, combined into `mask` (see JobOptions::mirror_weight);
// Model::infer writes it back unmirrored.
Model::RunCost combine_mirrored(Model& model, const Pixels& small, float weight, float union_share, Plane& mask) {
  const int w = mask.width, h = mask.height;
  Plane mirrored;
  InferOptions how;
  how.mirrored = true;
  const Model::RunCost cost = model.infer(small, w, h, mirrored, how);
  const float own = 1.f - weight;
  for (int y = 0; y < h; ++y) {
    float* out = mask.row(y);
    const float* m = mirrored.row(y);
    for (int x = 0; x < w; ++x) {
      const float a = out[x], b = m[x];
      const float mean = own * a + weight * b, most = std::max(a, b);
      out[x] = union_share >= 1.f ? most : mean + union_share * (most - mean);
    }
  }
  return cost;
}

// The model's answer at another square side, made from the full decode (the image's own pixels, not
// the first input resampled again), resampled to the mask's size and mixed into it with `weight`.
Model::RunCost mix_second_side(Model& model, const DecodedImage& full, const Region* roi, int side, float weight, Plane& mask) {
  Plane answer;
  Model::RunCost cost;
  {
    const Pixels small = model_input_from_decoded(full, roi, side, side);
    cost = model.infer(small, side, side, answer);
  }
  const AxisMap mx{static_cast<double>(side) / mask.width, 0.5 * side / mask.width - 0.5};
  const AxisMap my{static_cast<double>(side) / mask.height, 0.5 * side / mask.height - 0.5};
  const Plane resampled = resample_plane(answer, mask.width, mask.height, mx, my);
  for (size_t i = 0; i < mask.v.size(); ++i) mask.v[i] += weight * (resampled.v[i] - mask.v[i]);
  return cost;
}

// Jobs that reached the inference stage since the process started (inference_stages()).
std::atomic<uint64_t> g_inference_stages{0};

// The model's mask at its input's size, in 0..1: its answer for the model's input `small`,
// combined with those for the mirror and a second side when the job asks (effort=best). Each
// Model::infer releases its tensor once its run returns, before the next builds its own. Timings:
// the first answer's tensor counts as preprocessing (t.preprocess: the model's input and its
// tensor); the rest of that call and the other answers' (their pixels, tensors and runs) as
// inference, less the waits for a place to run (queue); inference_cpu is the runs' CPU.
Plane inference_stage(const JobOptions& o, Model& model, const Pixels& small, int in_w, int in_h, const DecodedImage& full,
                      const Region* roi, Timings& t) {
  Plane mask;
  const auto step = Clock::now();
  g_inference_stages.fetch_add(1, std::memory_order_relaxed);
  const Model::RunCost first = model.infer(small, in_w, in_h, mask);
  Model::RunCost cost = first;
  auto add = [&cost](const Model::RunCost& more) {
    cost.waited += more.waited;
    cost.cpu += more.cpu;
  };
  const bool mirror = o.mirror_weight > 0, second = o.second_side > 0 && model.spec().dynamic_size;
  if (mirror) add(combine_mirrored(model, small, o.mirror_weight, o.mirror_union, mask));
  if (second) add(mix_second_side(model, full, roi, o.second_side, o.second_weight, mask));
  // A weighted mean of answers in 0..1 may round past 1.
  if (mirror || second) clamp_unit(mask);
  t.preprocess += first.tensor;
  t.queue = cost.waited;
  t.inference = ms_since(step) - t.queue - first.tensor;
  t.inference_cpu = cost.cpu;
  return mask;
}

// The part of the image the output shows (Layout), cut out of the full image and resized to the
// content's size. The full image is released.
struct Cut {
  Layout layout;
  Pixels rgb, input_alpha;
};
Cut crop_stage(const Layout& layout, DecodedPtr& full, Timings& t) {
  const auto step = Clock::now();
  Cut cut;
  cut.layout = layout;
  const Box& b = layout.box;
  crop_and_resize(*full, b.x, b.y, b.w, b.h, layout.out_w, layout.out_h, cut.rgb, cut.input_alpha);
  full.reset();
  t.resize = ms_since(step);
  return cut;
}

// The alpha at the output's resolution from the model's mask (the guided filter with the model's
// input as its guide, or a plain resampling without refine), with levels, what fill_interior made
// opaque (`interior`, empty without semitransparency=false), the share of each pixel inside the
// image and the upload's own alpha applied; and, for a colour output, the foreground colours
// estimated in place in cut.rgb.
// The mask covers `region` of the image.
Plane matting_stage(const JobOptions& o, const Plane& mask, const Plane& interior, const Pixels& small, Cut& cut, const Region& region,
                    Timings& t) {
  const auto step = Clock::now();
  const Layout& l = cut.layout;
  const Box& box = l.box;
  const int out_w = l.out_w, out_h = l.out_h, in_w = mask.width, in_h = mask.height;
  // Output pixel centre -> mask pixel centre, per axis.
  const double kx = static_cast<double>(in_w) / region.w, ky = static_cast<double>(in_h) / region.h;
  const AxisMap mx{static_cast<double>(box.w) / out_w * kx, ((box.x - region.x) + 0.5 * box.w / out_w) * kx - 0.5};
  const AxisMap my{static_cast<double>(box.h) / out_h * ky, ((box.y - region.y) + 0.5 * box.h / out_h) * ky - 0.5};
  const std::vector<float> cov_x = coverage(out_w, box.x, box.w, l.vx0, l.vx1);
  const std::vector<float> cov_y = coverage(out_h, box.y, box.h, l.vy0, l.vy1);
  const bool levels = o.refine && o.levels_low < o.levels_high;
  const float level_scale = levels ? 1.f / (o.levels_high - o.levels_low) : 1.f;
  // Levels, then the share of each pixel inside the image, then the upload's own alpha: each a
  // loop of its own, without branches, which the compiler vectorises (one loop with them ran
  // scalar). A share of exactly 1 everywhere (no crop past the image) would multiply by 1, and is
  // skipped.
  const bool whole_columns = std::all_of(cov_x.begin(), cov_x.end(), [](float c) { return c == 1.f; });
  const float low = o.levels_low;
  const Pixels& input_alpha = cut.input_alpha;
  // The interior sampled bilinearly at each output pixel: what the refinement and the levels made
  // of it is raised back to it.
  const bool fill = !interior.v.empty();
  const std::vector<Lerp> fill_x = fill ? lerps(out_w, in_w, mx) : std::vector<Lerp>();
  const std::vector<Lerp> fill_y = fill ? lerps(out_h, in_h, my) : std::vector<Lerp>();
  auto finish = [&](int y, float* row) {
    if (levels) {
      for (int x = 0; x < out_w; ++x) {
        const float a = std::min(std::max(row[x], 0.f), 1.f);
        row[x] = std::min(std::max((a - low) * level_scale, 0.f), 1.f);
      }
    } else {
      for (int x = 0; x < out_w; ++x) row[x] = std::min(std::max(row[x], 0.f), 1.f);
    }
    if (fill) {
      const Lerp& ly = fill_y[y];
      const float* top = interior.row(ly.i0);
      const float* bottom = interior.row(ly.i1);
      for (int x = 0; x < out_w; ++x) {
        const Lerp& lx = fill_x[x];
        const float t = top[lx.i0] + (top[lx.i1] - top[lx.i0]) * lx.f;
        row[x] = std::max(row[x], t + (bottom[lx.i0] + (bottom[lx.i1] - bottom[lx.i0]) * lx.f - t) * ly.f);
      }
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

// despill=true: the screen's spill taken off the foreground colours (cut.rgb), where the background
// is a green or blue screen; counts as matting.
void despill_stage(const JobOptions& o, const Pixels& small, const Plane& mask, const Plane& alpha, const ForegroundBox& subject, Cut& cut,
                   Timings& t) {
  const auto step = Clock::now();
  const int channel = spill_channel(small, mask, o.despill_key_margin);
  const double band = o.despill_band * std::max(subject.width, subject.height);
  if (channel >= 0 && band > 0) despill(cut.rgb.data, alpha, channel, band);
  t.matting += ms_since(step);
}

// The subject's box in the result's pixels, clipped to the canvas (all 0 when it falls outside).
ForegroundBox foreground_box(const SubjectBox& s, const Layout& l) {
  const double kx = static_cast<double>(l.out_w) / l.box.w, ky = static_cast<double>(l.out_h) / l.box.h;
  const double left = std::max(0.0, std::floor(l.x + (s.x0 - l.box.x) * kx + 1e-6));
  const double right = std::min<double>(l.canvas_w, std::ceil(l.x + (s.x1 - l.box.x) * kx - 1e-6));
  const double top = std::max(0.0, std::floor(l.y + (s.y0 - l.box.y) * ky + 1e-6));
  const double bottom = std::min<double>(l.canvas_h, std::ceil(l.y + (s.y1 - l.box.y) * ky - 1e-6));
  ForegroundBox f;
  if (right <= left || bottom <= top) return f;
  f.left = static_cast<int>(left);
  f.top = static_cast<int>(top);
  f.width = static_cast<int>(right - left);
  f.height = static_cast<int>(bottom - top);
  return f;
}

// The image's own matte (remove_background=false, keep_alpha=auto; JobOptions::inference): no
// model runs, and the matte is the decoded image's alpha, or opaque where it has none.

// Whether the decoded image has an alpha band with a value below 255 anywhere (keep_alpha=auto).
bool translucent(const DecodedImage& image) {
  if (decoded_bands(image) != 4) return false;
  const int w = decoded_width(image), h = decoded_height(image);
  const uint8_t* pixels = decoded_pixels(image);
  std::atomic<bool> found{false};
  parallel_rows(h, [&](int first, int end) {
    for (int y = first; y < end && !found.load(std::memory_order_relaxed); ++y) {
      const uint8_t* row = pixels + static_cast<size_t>(y) * w * 4;
      uint8_t least = 255;
      for (int x = 0; x < w; ++x) least = std::min(least, row[x * 4 + 3]);
      if (least < 255) found.store(true, std::memory_order_relaxed);
    }
  });
  return found.load();
}

// The own matte's statistics over `region`, at the image's resolution (a mask region.w x
// region.h): the subject is where the alpha is at least 128 (the model's mask >= 0.5), all of the
// region without an alpha band. Nothing is faint: the uncertainty is 0.
MaskStats own_matte_stats(const DecodedImage& image, const Region& region) {
  MaskStats s;
  if (decoded_bands(image) != 4) {
    s.subject_pixels = static_cast<size_t>(region.w) * region.h;
    s.u0 = s.v0 = 0;
    s.u1 = region.w - 1;
    s.v1 = region.h - 1;
    return s;
  }
  const int stride = decoded_width(image) * 4;
  const uint8_t* pixels = decoded_pixels(image);
  s.u0 = region.w;
  s.v0 = region.h;
  std::mutex merge;
  parallel_rows(region.h, [&](int first, int end) {
    MaskStats b;
    b.u0 = region.w;
    b.v0 = region.h;
    for (int v = first; v < end; ++v) {
      const uint8_t* alpha = pixels + static_cast<size_t>(region.y + v) * stride + static_cast<size_t>(region.x) * 4 + 3;
      int count = 0, left = region.w, right = -1;
      for (int u = 0; u < region.w; ++u) {
        if (alpha[u * 4] < 128) continue;
        ++count;
        left = std::min(left, u);
        right = u;
      }
      if (count == 0) continue;
      b.add_row(count, left, right, v);
    }
    const std::lock_guard<std::mutex> lock(merge);
    s.merge(b);
  });
  return s;
}

// The own matte at the output's resolution: the share of each pixel inside the image (as
// matting_stage) times the upload's alpha resized with the colours (cut.input_alpha; 1 without
// one). The colours are the image's own: no foreground estimation. Counts as matting.
Plane own_matte_stage(const Cut& cut, Timings& t) {
  const auto step = Clock::now();
  const Layout& l = cut.layout;
  const int out_w = l.out_w, out_h = l.out_h;
  const std::vector<float> cov_x = coverage(out_w, l.box.x, l.box.w, l.vx0, l.vx1);
  const std::vector<float> cov_y = coverage(out_h, l.box.y, l.box.h, l.vy0, l.vy1);
  const Pixels& input_alpha = cut.input_alpha;
  Plane alpha(out_w, out_h, Unfilled{});
  parallel_rows(out_h, [&](int first, int end) {
    for (int y = first; y < end; ++y) {
      float* row = alpha.row(y);
      const float cy = cov_y[y];
      for (int x = 0; x < out_w; ++x) row[x] = cov_x[x] * cy;
      if (input_alpha.bands) {
        const uint8_t* in_alpha = input_alpha.data.data() + static_cast<size_t>(y) * out_w;
        for (int x = 0; x < out_w; ++x) row[x] *= in_alpha[x] / 255.f;
      }
    }
  });
  t.matting = ms_since(step);
  return alpha;
}

// bg_blur: the original photo on the canvas by the layout's map (the same as the cut-out's: the box
// resized to the content's size at x, y), blurred, as a canvas-sized background image. Read from
// the full decode before crop_stage releases it; its time counts as the effects'.
Pixels bg_blur_stage(const JobOptions& o, const DecodedImage& full, const Layout& l, Timings& t) {
  const auto step = Clock::now();
  CanvasMap map;
  map.canvas_w = l.canvas_w;
  map.canvas_h = l.canvas_h;
  map.kx = static_cast<double>(l.box.w) / l.out_w;
  map.ky = static_cast<double>(l.box.h) / l.out_h;
  map.ax = l.box.x - l.x * map.kx;
  map.ay = l.box.y - l.y * map.ky;
  Pixels blurred = blurred_background(o, full, map);
  t.effects += ms_since(step);
  return blurred;
}

// outline_color: the outline's layer from the finished matte, made before composing; its time counts
// as the effects'.
std::unique_ptr<OutlineLayer> outline_stage(const JobOptions& o, const Plane& alpha, const Layout& l, Timings& t) {
  const auto step = Clock::now();
  auto outline = std::make_unique<OutlineLayer>(o, alpha, Placement{l.canvas_w, l.canvas_h, l.x, l.y});
  t.effects += ms_since(step);
  return outline;
}

// The input's metadata the job keeps (options.metadata, options.keep_icc), read from its header
// before any pixel is decoded.
struct KeptMetadata {
  std::vector<uint8_t> xmp;  // the input's packet (metadata=xmp)
  ExifSubset exif;           // its Copyright and UserComment (the EXIF-subset modes)
  std::vector<uint8_t> icc;  // its RGB profile (keep_icc)
};

KeptMetadata kept_metadata(const uint8_t* data, size_t length, InputFormat format, const JobOptions& o) {
  KeptMetadata kept;
  if (o.metadata == MetadataMode::None && !o.keep_icc) return kept;
  InputMetadata in = read_metadata(data, length, format);
  if (o.metadata == MetadataMode::Xmp) {
    kept.xmp = std::move(in.xmp);
    while (!kept.xmp.empty() && kept.xmp.back() == 0) kept.xmp.pop_back();
  }
  if (o.metadata == MetadataMode::ExifSubset || o.metadata == MetadataMode::ExifSubsetXmp)
    kept.exif = parse_exif_subset(in.exif.data(), in.exif.size());
  if (o.keep_icc && is_rgb_icc(in.icc.data(), in.icc.size())) kept.icc = std::move(in.icc);
  return kept;
}

// What the output of `format` carries: the EXIF block holds the density where the format keeps it
// in EXIF (WebP, AVIF), beside the kept tags; the ICC profile only in a PNG.
OutputMetadata output_metadata(const KeptMetadata& kept, const JobOptions& o, OutputFormat format) {
  OutputMetadata meta;
  meta.xmp = kept.xmp;
  const bool subset = kept.exif.has_copyright || kept.exif.has_comment;
  if (subset) {
    const bool exif_density = format == OutputFormat::Webp || format == OutputFormat::Avif;
    meta.exif = build_exif(kept.exif, exif_density ? o.dpi : 0);
    if (o.metadata == MetadataMode::ExifSubsetXmp) meta.xmp = build_xmp(kept.exif);
  }
  if (format == OutputFormat::Png) meta.icc = kept.icc;
  return meta;
}

// The output's pixels composed and encoded: for PNG row by row inside the writer, so composing
// counts as encoding. format=auto is decided here: PNG where any pixel of the output is translucent
// (a scan of the alpha, composed on the background), else JPEG. With zip, the alpha is encoded
// too, as a one-band PNG, from the same plane. The shadow, where there is one, is made here.
void encode_stage(const JobOptions& o, const Plane& alpha, const Buffer<uint8_t>& fg, const Layout& l, const ForegroundBox& subject,
                  const Pixels* background, const OutlineLayer* outline, const KeptMetadata& kept, JobResult& result) {
  const auto step = Clock::now();
  const Placement at{l.canvas_w, l.canvas_h, l.x, l.y};
  std::unique_ptr<ShadowLayer> shadow;
  if (o.shadow != ShadowKind::None && !o.alpha_only && subject.width > 0) {
    shadow = std::make_unique<ShadowLayer>(o, alpha, at, Region{subject.left, subject.top, subject.width, subject.height});
  }
  JobOptions chosen = o;
  if (o.format == OutputFormat::Auto) {
    const Composer probe(o, OutputFormat::Png, alpha, fg, at, background);
    chosen.format = probe.translucent() ? OutputFormat::Png : OutputFormat::Jpeg;
  }
  const Composer composer(chosen, chosen.format, alpha, fg, at, background, shadow.get(), Composed::Image, outline);
  // The metadata go with the image (with zip: color.jpg), never with zip's alpha.png.
  const OutputMetadata meta = output_metadata(kept, o, chosen.format);
  if (chosen.format == OutputFormat::Png && png_writer_available()) {
    result.encoded = encode_png_rows(
        composer.width(), composer.height(), composer.bands(), o.png_compression, o.dpi,
        [&composer](int y, uint8_t* row) { composer.row(y, row); }, meta);
  } else {
    result.encoded = encode(composer.whole(), chosen, meta);
  }
  if (o.zip) {
    // The alpha beside the colours: the mask channels=alpha gives for the same options, with the
    // shadow and the outline where there are; opaque for channels=alpha, whose colours are the mask.
    const Composer alpha_part(o, OutputFormat::Png, alpha, fg, at, nullptr, shadow.get(), Composed::ZipAlpha, outline);
    try {
      if (png_writer_available()) {
        result.alpha = encode_png_rows(alpha_part.width(), alpha_part.height(), alpha_part.bands(), o.png_compression, o.dpi,
                                       [&alpha_part](int y, uint8_t* row) { alpha_part.row(y, row); });
      } else {
        JobOptions png = o;
        png.format = OutputFormat::Png;
        result.alpha = encode(alpha_part.whole(), png);
      }
    } catch (...) {  // the colours, already encoded, have no owner yet
      free_encoded(result.encoded.data, result.encoded.own);
      result.encoded.data = nullptr;
      throw;
    }
  }
  result.timings.encode = ms_since(step);
  result.width = composer.width();
  result.height = composer.height();
  result.channels = composer.bands();
  result.format = chosen.format;
}

}  // namespace

uint64_t inference_stages() { return g_inference_stages.load(std::memory_order_relaxed); }

JobResult run_job(const uint8_t* data, size_t length, const JobOptions& o, Model* model, const uint8_t* background,
                  size_t background_length) {
  const auto start = Clock::now();
  JobResult result;
  Timings& t = result.timings;
  const bool has_bg_image = background != nullptr && !o.alpha_only;
  const bool blurred_bg = o.bg_blur != BgBlur::None && !o.alpha_only;
  if (blurred_bg && has_bg_image) throw PipelineError(ErrorCode::Internal, "bg_blur and a background image are two backgrounds");

  const auto header_start = Clock::now();
  const InputFormat format = sniff_format(data, length);
  const HeaderInfo header = read_header(data, length, format, o.max_side);
  const KeptMetadata kept = kept_metadata(data, length, format, o);
  t.decode += ms_since(header_start);
  // The background now, so that bytes that are no image, or whose data do not decode, fail before
  // any work: its header, then its data decoded whole at the smallest scale the loader offers (a
  // JPEG at 1/8, a WebP scaled as it decodes) and dropped. The decode that composes comes later, at
  // the canvas' size, which the subject decides.
  if (has_bg_image) {
    const auto step = Clock::now();
    try {
      read_header(background, background_length, sniff_format(background, background_length), o.max_side);
      (void)decode_background(background, background_length, o.max_side, 1, 1);
    } catch (const PipelineError& e) {
      throw PipelineError(e.code(), e.what(), true);
    }
    t.decode += ms_since(step);
  }
  Region region{0, 0, header.width, header.height};
  if (o.has_roi) {
    const int x0 = std::clamp(o.roi[0], 0, header.width), y0 = std::clamp(o.roi[1], 0, header.height);
    const int x1 = std::clamp(o.roi[2], 0, header.width), y1 = std::clamp(o.roi[3], 0, header.height);
    if (x1 <= x0 || y1 <= y0) throw PipelineError(ErrorCode::Internal, "the region of interest is outside the image");
    region = {x0, y0, x1 - x0, y1 - y0};
  }

  const Region* roi = o.has_roi ? &region : nullptr;
  // The image's own matte, without inference (remove_background=false), or where keep_alpha finds
  // an alpha below 255 in the image's one full decode; only an image with an alpha channel can
  // have one. Otherwise the model runs: its input is made from that decode.
  DecodedInputs in;
  bool own_matte = !o.inference;
  if (!o.inference || (o.keep_alpha && header.alpha)) {
    const auto step = Clock::now();
    if (format == InputFormat::Jpeg) check_jpeg_scans(data, length);
    in.full = decode_full(data, length, format);
    t.decode += ms_since(step);
    own_matte = own_matte || translucent(*in.full);
  }
  if (!own_matte && model == nullptr) throw PipelineError(ErrorCode::Internal, "a job with inference has no model");

  // The inference size is chosen per job in TypeScript (smaller for small outputs) when the model
  // takes any size; a model with a fixed input always gets its own. Without inference, the mask is
  // the region at the image's resolution (own_matte_stats).
  const ModelSpec* spec = own_matte ? nullptr : &model->spec();
  const int in_w = own_matte ? region.w : spec->dynamic_size ? o.inference_size : spec->width;
  const int in_h = own_matte ? region.h : spec->dynamic_size ? o.inference_size : spec->height;

  Plane mask;
  MaskStats stats;
  if (own_matte) {
    stats = own_matte_stats(*in.full, region);
  } else {
    if (in.full) {  // decoded above (keep_alpha): the model's input from it
      const auto step = Clock::now();
      in.small = model_input_from_decoded(*in.full, roi, in_w, in_h);
      t.preprocess = ms_since(step);
    } else {
      in = decode_stage(data, length, format, header, roi, in_w, in_h, t);
      t.preprocess = ms_since(in.preprocess_from);
    }
    // in.small, the model's input, also guides the matting (matting_stage) and the despill.
    mask = inference_stage(o, *model, in.small, in_w, in_h, *in.full, roi, t);
    stats = analyse_mask(mask);
  }
  const int image_w = decoded_width(*in.full), image_h = decoded_height(*in.full);
  if (image_w != header.width || image_h != header.height)
    throw PipelineError(ErrorCode::InvalidImage, "decoded size differs from the header");
  if (stats.subject_pixels < std::max<double>(1.0, o.min_subject * static_cast<double>(static_cast<size_t>(in_w) * in_h))) {
    throw PipelineError(ErrorCode::ForegroundNotFound, "no subject in the mask");
  }
  result.uncertainty = own_matte ? 0 : uncertainty(stats);
  Plane interior;
  if (o.opaque_interior && !own_matte) {
    const auto step = Clock::now();
    const int inset = std::max(1, static_cast<int>(std::lround(o.interior_inset * std::max(in_w, in_h))));
    interior = fill_interior(mask, o.interior_min, inset);
    t.matting += ms_since(step);
  }

  const SubjectBox subject = subject_box(stats, region, in_w, in_h);
  const Layout l = layout(o, subject, region, image_w, image_h);
  Pixels bg_pixels;
  if (blurred_bg) bg_pixels = bg_blur_stage(o, *in.full, l, t);
  Cut cut = crop_stage(l, in.full, t);
  if (has_bg_image) {
    const auto step = Clock::now();
    try {
      bg_pixels = decode_background(background, background_length, o.max_side, l.canvas_w, l.canvas_h, o.bg_contain);
    } catch (const PipelineError& e) {
      throw PipelineError(e.code(), e.what(), true);
    }
    t.resize += ms_since(step);
  }
  const Plane alpha = own_matte ? own_matte_stage(cut, t) : matting_stage(o, mask, interior, in.small, cut, region, t);
  result.foreground = foreground_box(subject, l);
  if (o.despill && !o.alpha_only && !own_matte) despill_stage(o, in.small, mask, alpha, result.foreground, cut, t);
  Buffer<uint8_t> fg;
  if (!o.alpha_only) fg = std::move(cut.rgb.data);
  std::unique_ptr<OutlineLayer> outline;
  if (o.outline && !o.alpha_only && o.outline_width > 0) outline = outline_stage(o, alpha, l, t);
  encode_stage(o, alpha, fg, l, result.foreground, has_bg_image || blurred_bg ? &bg_pixels : nullptr, outline.get(), kept, result);
  t.total = ms_since(start);
  return result;
}

}  // namespace bgone
