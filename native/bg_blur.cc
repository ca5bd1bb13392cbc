#include "bg_blur.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "box_mean.h"
#include "buffers.h"
#include "parallel.h"
#include "plane.h"

namespace bgone {

namespace {

// The grid's larger side has at most this many cells, so its planes stay small at any canvas (a
// blur under about a cell is blurred as one cell).
constexpr double kMaxCells = 1024;
// A cell is as large as the blur allows: the Gaussian's standard deviation spans at least
// kGaussianCells cells, the bokeh disc's radius at least kBokehCells. Past that the blurred grid is
// smooth from one cell to the next, and sampling it bilinearly shows no grid.
constexpr double kGaussianCells = 3;
constexpr double kBokehCells = 6;

// A 3-channel float image, channels interleaved.
struct Grid {
  int w = 0, h = 0;
  Buffer<float> v;
  float* row(int y) { return v.data() + static_cast<size_t>(y) * w * 3; }
  const float* row(int y) const { return v.data() + static_cast<size_t>(y) * w * 3; }
};

// Three passes of a box mean of radius r (clipped at the borders), in place: a Gaussian-like blur
// of standard deviation sqrt(r (r + 1)), as blur_plane does for one channel.
void gaussian(Grid& g, int r) {
  Grid next;
  next.w = g.w;
  next.h = g.h;
  next.v.resize(g.v.size());
  for (int pass = 0; pass < 3; ++pass) {
    auto source = [&g](int y, int xa, int xb, float* row) { std::copy(g.row(y) + xa * 3, g.row(y) + xb * 3, row + xa * 3); };
    auto sink = [&next](int y, const float* mean) { std::copy(mean, mean + static_cast<size_t>(next.w) * 3, next.row(y)); };
    parallel_bands(g.h, [&](int b0, int b1) { stream_box_mean<3>(g.w, g.h, r, b0, b1, 0, g.w, source, sink); });
    std::swap(g.v, next.v);
  }
}

// The flat mean over a disc of radius `radius` cells around each cell (the cells whose centres lie
// within it), clipped at the borders (each cell divides by its own count): per row of the disc,
// one span of a row's running sums.
void bokeh(Grid& g, double radius) {
  const int reach = static_cast<int>(std::floor(radius));
  std::vector<int> half(2 * reach + 1);
  for (int dy = -reach; dy <= reach; ++dy) half[dy + reach] = static_cast<int>(std::floor(std::sqrt(radius * radius - dy * dy)));
  // Running sums of each row, one more column than the row: sums[x] is the sum of columns below x.
  const size_t stride = (static_cast<size_t>(g.w) + 1) * 3;
  std::vector<double> sums(stride * g.h);
  parallel_rows(g.h, [&](int first, int end) {
    for (int y = first; y < end; ++y) {
      double* s = sums.data() + stride * y;
      const float* in = g.row(y);
      s[0] = s[1] = s[2] = 0;
      for (int x = 0; x < g.w; ++x) {
        for (int c = 0; c < 3; ++c) s[(x + 1) * 3 + c] = s[x * 3 + c] + in[x * 3 + c];
      }
    }
  });
  Grid out;
  out.w = g.w;
  out.h = g.h;
  out.v.resize(g.v.size());
  parallel_rows(g.h, [&](int first, int end) {
    for (int y = first; y < end; ++y) {
      float* o = out.row(y);
      for (int x = 0; x < g.w; ++x) {
        double acc[3] = {0, 0, 0};
        int count = 0;
        for (int dy = std::max(-reach, -y); dy <= std::min(reach, g.h - 1 - y); ++dy) {
          const int w = half[dy + reach];
          const int x0 = std::max(0, x - w), x1 = std::min(g.w, x + w + 1);
          const double* s = sums.data() + stride * (y + dy);
          for (int c = 0; c < 3; ++c) acc[c] += s[x1 * 3 + c] - s[x0 * 3 + c];
          count += x1 - x0;
        }
        for (int c = 0; c < 3; ++c) o[x * 3 + c] = static_cast<float>(acc[c] / count);
      }
    }
  });
  std::swap(g.v, out.v);
}

// The image's pixels [b0, b1) along one axis that the canvas' [0, n) shows (image = a + canvas * k),
// clipped to the image (size pixels), at least one.
void shown(double a, double k, int n, int size, int& b0, int& b1) {
  b0 = static_cast<int>(std::clamp(std::floor(a), 0.0, size - 1.0));
  b1 = static_cast<int>(std::clamp(std::ceil(a + n * k), b0 + 1.0, static_cast<double>(size)));
}

}  // namespace

Pixels blurred_background(const JobOptions& o, const DecodedImage& image, const CanvasMap& m) {
  const int W = m.canvas_w, H = m.canvas_h;
  const double side = std::max(W, H);
  const double sigma = o.bg_blur_radius * side;  // canvas pixels; the bokeh disc's radius is twice it
  const bool disc = o.bg_blur == BgBlur::Bokeh;
  const int least = std::max(1, static_cast<int>(std::ceil(side / kMaxCells)));
  const int f = std::max(least, static_cast<int>(std::floor(disc ? 2 * sigma / kBokehCells : sigma / kGaussianCells)));
  Grid g;
  g.w = (W + f - 1) / f;
  g.h = (H + f - 1) / f;
  g.v.resize(static_cast<size_t>(g.w) * g.h * 3);
  // The part of the image the canvas shows, shrunk to about a pixel a cell (a box mean), then
  // sampled at each cell's centre, clamped to its edge: the photo's edge repeated where the canvas
  // reaches past it.
  int bx0, bx1, by0, by1;
  shown(m.ax, m.kx, W, decoded_width(image), bx0, bx1);
  shown(m.ay, m.ky, H, decoded_height(image), by0, by1);
  const int shrink = std::max(1, static_cast<int>(std::floor(f * std::min(m.kx, m.ky))));
  const Pixels small = shrink_box(image, bx0, by0, bx1 - bx0, by1 - by0, shrink);
  const int sw = small.width, sh = small.height;
  // Cell centre -> small pixel centre.
  const std::vector<Lerp> cols = lerps(g.w, sw, AxisMap{f * m.kx / shrink, (m.ax + 0.5 * f * m.kx - bx0) / shrink - 0.5});
  const std::vector<Lerp> rows = lerps(g.h, sh, AxisMap{f * m.ky / shrink, (m.ay + 0.5 * f * m.ky - by0) / shrink - 0.5});
  parallel_rows(g.h, [&](int first, int end) {
    for (int y = first; y < end; ++y) {
      const Lerp& r = rows[y];
      const uint8_t* top = small.data.data() + static_cast<size_t>(r.i0) * sw * 3;
      const uint8_t* bottom = small.data.data() + static_cast<size_t>(r.i1) * sw * 3;
      float* out = g.row(y);
      for (int x = 0; x < g.w; ++x) {
        const Lerp& c = cols[x];
        for (int ch = 0; ch < 3; ++ch) {
          const float t = top[c.i0 * 3 + ch] + (top[c.i1 * 3 + ch] - top[c.i0 * 3 + ch]) * c.f;
          const float b = bottom[c.i0 * 3 + ch] + (bottom[c.i1 * 3 + ch] - bottom[c.i0 * 3 + ch]) * c.f;
          out[x * 3 + ch] = t + (b - t) * r.f;
        }
      }
    }
  });
  if (disc) {
    bokeh(g, 2 * sigma / f);
  } else {
    gaussian(g, blur_radius(sigma / f));
  }
  // Canvas pixel centre -> cell centre.
  const AxisMap to_cell{1.0 / f, 0.5 / f - 0.5};
  const std::vector<Lerp> canvas_cols = lerps(W, g.w, to_cell);
  const std::vector<Lerp> canvas_rows = lerps(H, g.h, to_cell);
  Pixels out;
  out.width = W;
  out.height = H;
  out.bands = 3;
  out.data.resize(static_cast<size_t>(W) * H * 3);
  parallel_rows(H, [&](int first, int end) {
    // Each row of cells interpolated along the canvas' columns once, kept by its parity (a canvas
    // row samples two rows of cells next to each other), then one interpolation between them a row.
    std::vector<float> along[2] = {std::vector<float>(static_cast<size_t>(W) * 3), std::vector<float>(static_cast<size_t>(W) * 3)};
    int held[2] = {-1, -1};
    auto cells = [&](int cy) {
      std::vector<float>& dst = along[cy & 1];
      if (held[cy & 1] != cy) {
        const float* src = g.row(cy);
        for (int x = 0; x < W; ++x) {
          const Lerp& c = canvas_cols[x];
          for (int ch = 0; ch < 3; ++ch) dst[x * 3 + ch] = src[c.i0 * 3 + ch] + (src[c.i1 * 3 + ch] - src[c.i0 * 3 + ch]) * c.f;
        }
        held[cy & 1] = cy;
      }
      return dst.data();
    };
    for (int y = first; y < end; ++y) {
      const Lerp& r = canvas_rows[y];
      const float* top = cells(r.i0);
      const float* bottom = cells(r.i1);
      uint8_t* px = out.data.data() + static_cast<size_t>(y) * W * 3;
      for (int i = 0; i < W * 3; ++i) {
        const float v = top[i] + (bottom[i] - top[i]) * r.f;
        px[i] = static_cast<uint8_t>(std::min(std::max(v, 0.f), 255.f) + 0.5f);
      }
    }
  });
  return out;
}

}  // namespace bgone
