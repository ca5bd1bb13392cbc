#include "matting.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace bgone {

namespace {
std::atomic<int> g_cores_in_use{0};
}

CoresInUse::CoresInUse(int cores) : cores_(cores) { g_cores_in_use += cores_; }
CoresInUse::~CoresInUse() { g_cores_in_use -= cores_; }

void parallel_for(int count, const std::function<void(int)>& fn) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int workers = std::min(count, std::max(1, cores - g_cores_in_use.load()));
  if (workers <= 1) {
    for (int i = 0; i < count; ++i) fn(i);
    return;
  }
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int i; (i = next.fetch_add(1)) < count;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

void parallel_rows(int height, const std::function<void(int, int)>& fn) {
  const int blocks = std::max(1, std::min(height, 64));
  parallel_for(blocks, [&](int b) {
    const int first = static_cast<int>(static_cast<long long>(height) * b / blocks);
    const int end = static_cast<int>(static_cast<long long>(height) * (b + 1) / blocks);
    if (first < end) fn(first, end);
  });
}

namespace {

struct Tap {
  int first = 0;               // first source index
  std::vector<float> weights;  // normalised
};

// Filter taps of a tent filter for every output index along one axis.
std::vector<Tap> axis_taps(int out_n, int src_n, AxisMap map) {
  std::vector<Tap> taps(out_n);
  const double support = std::max(1.0, map.scale);  // widen when shrinking (antialiasing)
  for (int o = 0; o < out_n; ++o) {
    const double centre = map.scale * o + map.offset;
    int lo = static_cast<int>(std::floor(centre - support)) + 1;
    int hi = static_cast<int>(std::ceil(centre + support)) - 1;
    if (hi < lo) hi = lo;
    Tap& tap = taps[o];
    double sum = 0;
    std::vector<double> w;
    for (int s = lo; s <= hi; ++s) {
      double weight = 1.0 - std::fabs(s - centre) / support;
      if (weight < 0) weight = 0;
      w.push_back(weight);
      sum += weight;
    }
    if (sum <= 0) {  // centre falls exactly between taps at the limit: nearest sample
      lo = hi = static_cast<int>(std::lround(centre));
      w.assign(1, 1.0);
      sum = 1;
    }
    // Clamp to the source: fold weights of out-of-range taps onto the edge sample.
    const int first = std::clamp(lo, 0, src_n - 1);
    const int last = std::clamp(hi, 0, src_n - 1);
    tap.first = first;
    tap.weights.assign(last - first + 1, 0.f);
    for (int s = lo; s <= hi; ++s) {
      const int c = std::clamp(s, 0, src_n - 1);
      tap.weights[c - first] += static_cast<float>(w[s - lo] / sum);
    }
  }
  return taps;
}

}  // namespace

Plane resample_plane(const Plane& src, int out_w, int out_h, AxisMap mx, AxisMap my) {
  const std::vector<Tap> tx = axis_taps(out_w, src.width, mx);
  const std::vector<Tap> ty = axis_taps(out_h, src.height, my);
  // Only the source rows some output row touches need the horizontal pass.
  int row_lo = src.height, row_hi = -1;
  for (const Tap& t : ty) {
    row_lo = std::min(row_lo, t.first);
    row_hi = std::max(row_hi, t.first + static_cast<int>(t.weights.size()) - 1);
  }
  Plane horizontal(out_w, row_hi - row_lo + 1);
  for (int y = row_lo; y <= row_hi; ++y) {
    const float* in = src.row(y);
    float* out = horizontal.row(y - row_lo);
    for (int x = 0; x < out_w; ++x) {
      const Tap& t = tx[x];
      float acc = 0;
      const float* p = in + t.first;
      for (size_t k = 0; k < t.weights.size(); ++k) acc += p[k] * t.weights[k];
      out[x] = acc;
    }
  }
  Plane out(out_w, out_h);
  for (int y = 0; y < out_h; ++y) {
    const Tap& t = ty[y];
    float* o = out.row(y);
    for (size_t k = 0; k < t.weights.size(); ++k) {
      const float w = t.weights[k];
      const float* in = horizontal.row(t.first + static_cast<int>(k) - row_lo);
      for (int x = 0; x < out_w; ++x) o[x] += in[x] * w;
    }
  }
  return out;
}

void box_mean(const float* in, float* out, int w, int h, int r) {
  // Horizontal running sums into tmp, then vertical running sums; both O(1) per pixel. Windows
  // are clipped at the borders, so each position divides by its own count (precomputed inverses).
  // `in` is read only by the first pass and `out` written only by the second: they may be one
  // buffer, which spares the callers a plane each (fresh pages the kernel must fault in and zero).
  Buffer<float> tmp(static_cast<size_t>(w) * h);
  std::vector<double> inv_x(w), acc(w);
  for (int x = 0; x < w; ++x) inv_x[x] = 1.0 / (std::min(w - 1, x + r) - std::max(0, x - r) + 1);
  // A row's running sum is one chain of dependent additions: four rows advance side by side so
  // that the processor overlaps their chains (the same arithmetic per row, about twice as fast).
  constexpr int kRows = 4;
  for (int y0 = 0; y0 < h; y0 += kRows) {
    const int rows = std::min(kRows, h - y0);
    const float* src[kRows];
    float* dst[kRows];
    double sum[kRows] = {};
    for (int k = 0; k < kRows; ++k) {
      const int y = y0 + std::min(k, rows - 1);  // a short last block repeats its last row
      src[k] = in + static_cast<size_t>(y) * w;
      dst[k] = tmp.data() + static_cast<size_t>(y) * w;
      for (int x = 0; x <= std::min(r, w - 1); ++x) sum[k] += src[k][x];
    }
    for (int x = 0; x < w; ++x) {
      const bool add = x + r + 1 < w, sub = x - r >= 0;
      for (int k = 0; k < kRows; ++k) {
        dst[k][x] = static_cast<float>(sum[k] * inv_x[x]);
        if (add) sum[k] += src[k][x + r + 1];
        if (sub) sum[k] -= src[k][x - r];
      }
    }
  }
  for (int y = 0; y <= std::min(r, h - 1); ++y) {
    const float* src = tmp.data() + static_cast<size_t>(y) * w;
    for (int x = 0; x < w; ++x) acc[x] += src[x];
  }
  for (int y = 0; y < h; ++y) {
    const double inv = 1.0 / (std::min(h - 1, y + r) - std::max(0, y - r) + 1);
    float* dst = out + static_cast<size_t>(y) * w;
    const float* add = y + r + 1 < h ? tmp.data() + static_cast<size_t>(y + r + 1) * w : nullptr;
    const float* sub = y - r >= 0 ? tmp.data() + static_cast<size_t>(y - r) * w : nullptr;
    for (int x = 0; x < w; ++x) {
      dst[x] = static_cast<float>(acc[x] * inv);
      if (add) acc[x] += add[x];
      if (sub) acc[x] -= sub[x];
    }
  }
}

Plane halve(const uint8_t* rgb, const Plane& mask, Buffer<uint8_t>& rgb_out) {
  const int w = mask.width, hw = std::max(1, mask.width / 2), hh = std::max(1, mask.height / 2);
  const int step_x = mask.width > 1 ? 1 : 0, step_y = mask.height > 1 ? w : 0;
  Plane half(hw, hh);
  rgb_out.resize(static_cast<size_t>(hw) * hh * 3);
  parallel_rows(hh, [&](int first, int end) {
    for (int y = first; y < end; ++y) {
      for (int x = 0; x < hw; ++x) {
        const size_t i0 = static_cast<size_t>(2 * y) * w + 2 * x, i1 = i0 + step_x, i2 = i0 + step_y, i3 = i2 + step_x;
        const size_t o = static_cast<size_t>(y) * hw + x;
        for (int c = 0; c < 3; ++c) {
          rgb_out[o * 3 + c] = static_cast<uint8_t>((rgb[i0 * 3 + c] + rgb[i1 * 3 + c] + rgb[i2 * 3 + c] + rgb[i3 * 3 + c] + 2) / 4);
        }
        half.v[o] = (mask.v[i0] + mask.v[i1] + mask.v[i2] + mask.v[i3]) * 0.25f;
      }
    }
  });
  return half;
}

GuidedCoefficients fit_guided(const uint8_t* rgb, const Plane& mask, int radius, double eps) {
  const int w = mask.width, h = mask.height;
  const size_t n = static_cast<size_t>(w) * h;
  // Products to average: I (3), p, I*p (3), I*I^T (6 unique).
  Buffer<float> ch[13];
  for (auto& c : ch) c.resize(n);
  parallel_rows(h, [&](int first, int end) {
    for (size_t i = static_cast<size_t>(first) * w; i < static_cast<size_t>(end) * w; ++i) {
      const float r = rgb[i * 3] / 255.f, g = rgb[i * 3 + 1] / 255.f, b = rgb[i * 3 + 2] / 255.f, p = mask.v[i];
      ch[0][i] = r;
      ch[1][i] = g;
      ch[2][i] = b;
      ch[3][i] = p;
      ch[4][i] = r * p;
      ch[5][i] = g * p;
      ch[6][i] = b * p;
      ch[7][i] = r * r;
      ch[8][i] = r * g;
      ch[9][i] = r * b;
      ch[10][i] = g * g;
      ch[11][i] = g * b;
      ch[12][i] = b * b;
    }
  });
  parallel_for(13, [&](int c) { box_mean(ch[c].data(), ch[c].data(), w, h, radius); });
  GuidedCoefficients k;
  for (auto& a : k.a) a = Plane(w, h);
  k.b = Plane(w, h);
  parallel_rows(h, [&](int first, int end) {
    for (size_t i = static_cast<size_t>(first) * w; i < static_cast<size_t>(end) * w; ++i) {
      const double mr = ch[0][i], mg = ch[1][i], mb = ch[2][i], mp = ch[3][i];
      const double cr = ch[4][i] - mr * mp, cg = ch[5][i] - mg * mp, cb = ch[6][i] - mb * mp;
      // Covariance of the guide plus eps on the diagonal, inverted by cofactors (symmetric 3x3).
      const double srr = ch[7][i] - mr * mr + eps, srg = ch[8][i] - mr * mg, srb = ch[9][i] - mr * mb;
      const double sgg = ch[10][i] - mg * mg + eps, sgb = ch[11][i] - mg * mb, sbb = ch[12][i] - mb * mb + eps;
      const double i00 = sgg * sbb - sgb * sgb, i01 = srb * sgb - srg * sbb, i02 = srg * sgb - srb * sgg;
      const double i11 = srr * sbb - srb * srb, i12 = srb * srg - srr * sgb, i22 = srr * sgg - srg * srg;
      const double det = srr * i00 + srg * i01 + srb * i02;
      const double inv = det != 0 ? 1.0 / det : 0.0;
      const double ar = (i00 * cr + i01 * cg + i02 * cb) * inv;
      const double ag = (i01 * cr + i11 * cg + i12 * cb) * inv;
      const double ab = (i02 * cr + i12 * cg + i22 * cb) * inv;
      k.a[0].v[i] = static_cast<float>(ar);
      k.a[1].v[i] = static_cast<float>(ag);
      k.a[2].v[i] = static_cast<float>(ab);
      k.b.v[i] = static_cast<float>(mp - ar * mr - ag * mg - ab * mb);
    }
  });
  Plane* planes[4] = {&k.a[0], &k.a[1], &k.a[2], &k.b};
  parallel_for(4, [&](int c) { box_mean(planes[c]->v.data(), planes[c]->v.data(), w, h, radius); });
  return k;
}

namespace {

// Bilinear sample positions along one axis (upsampling: every output maps between two samples).
struct Lerp {
  int i0, i1;
  float f;
};
std::vector<Lerp> lerps(int out_n, int src_n, AxisMap map) {
  std::vector<Lerp> l(out_n);
  for (int o = 0; o < out_n; ++o) {
    const double pos = std::clamp(map.scale * o + map.offset, 0.0, static_cast<double>(src_n - 1));
    const int i0 = static_cast<int>(pos);
    l[o] = {i0, std::min(i0 + 1, src_n - 1), static_cast<float>(pos - i0)};
  }
  return l;
}

}  // namespace

Plane apply_guided(const GuidedCoefficients& k, const uint8_t* rgb, int out_w, int out_h, AxisMap mx, AxisMap my) {
  Plane q(out_w, out_h);
  if (mx.scale > 1.0 || my.scale > 1.0) {
    // Shrinking: antialiased resampling of each coefficient plane (the output is small here).
    Plane ar = resample_plane(k.a[0], out_w, out_h, mx, my);
    Plane ag = resample_plane(k.a[1], out_w, out_h, mx, my);
    Plane ab = resample_plane(k.a[2], out_w, out_h, mx, my);
    Plane b = resample_plane(k.b, out_w, out_h, mx, my);
    for (size_t i = 0; i < q.v.size(); ++i) {
      const float v = b.v[i] + (ar.v[i] * rgb[i * 3] + ag.v[i] * rgb[i * 3 + 1] + ab.v[i] * rgb[i * 3 + 2]) * (1.f / 255.f);
      q.v[i] = std::clamp(v, 0.f, 1.f);
    }
    return q;
  }
  // Enlarging (the common case for photos): bilinear, fused, without full-size coefficient planes:
  // each output row interpolates the four planes vertically once, then horizontally per pixel.
  const int sw = k.b.width;
  const std::vector<Lerp> lx = lerps(out_w, sw, mx), ly = lerps(out_h, k.b.height, my);
  const Plane* planes[4] = {&k.a[0], &k.a[1], &k.a[2], &k.b};
  const int bands = 4;
  parallel_rows(out_h, [&](int y_begin, int y_end) {
    std::vector<float> row(static_cast<size_t>(sw) * bands);
    for (int y = y_begin; y < y_end; ++y) {
      const Lerp& v = ly[y];
      for (int c = 0; c < bands; ++c) {
        const float* r0 = planes[c]->row(v.i0);
        const float* r1 = planes[c]->row(v.i1);
        for (int x = 0; x < sw; ++x) row[static_cast<size_t>(x) * bands + c] = r0[x] + (r1[x] - r0[x]) * v.f;
      }
      const uint8_t* px = rgb + static_cast<size_t>(y) * out_w * 3;
      float* out = q.row(y);
      for (int x = 0; x < out_w; ++x) {
        const Lerp& h = lx[x];
        const float* p0 = row.data() + static_cast<size_t>(h.i0) * bands;
        const float* p1 = row.data() + static_cast<size_t>(h.i1) * bands;
        const float ar = p0[0] + (p1[0] - p0[0]) * h.f, ag = p0[1] + (p1[1] - p0[1]) * h.f;
        const float ab = p0[2] + (p1[2] - p0[2]) * h.f, b = p0[3] + (p1[3] - p0[3]) * h.f;
        const float value = b + (ar * px[x * 3] + ag * px[x * 3 + 1] + ab * px[x * 3 + 2]) * (1.f / 255.f);
        out[x] = std::clamp(value, 0.f, 1.f);
      }
    }
  });
  return q;
}

namespace {

// Blur fusion runs at full resolution up to kForegroundFullPixels, above that at an integer
// fraction of the resolution of no more than kForegroundWorkPixels. The blurs' radii scale with the
// working resolution, so the estimate is the same blur in image pixels on a coarser grid: at 2 MP a
// 0.22 MP grid instead of 0.5 MP changed band colours by 0.6 levels on average (0.3 % of them by
// more than 8) for about 15 ms less CPU (docs/performance.md).
constexpr double kForegroundFullPixels = 1e6;
constexpr double kForegroundWorkPixels = 0.4e6;

// Alpha-weighted local means of F and B (the "blurred estimates" of blur fusion).
void weighted_means(const Buffer<float>& fg, const Buffer<float>& bg, const Plane& alpha, int radius, Buffer<float>& f_hat,
                    Buffer<float>& b_hat) {
  const int w = alpha.width, h = alpha.height;
  const size_t n = static_cast<size_t>(w) * h;
  Buffer<float> blurred_a(n), fa[3], ba[3];
  parallel_for(7, [&](int job) {
    if (job == 6) {
      box_mean(alpha.v.data(), blurred_a.data(), w, h, radius);
      return;
    }
    const int c = job % 3;
    const bool is_fg = job < 3;
    Buffer<float>& out = is_fg ? fa[c] : ba[c];
    out.resize(n);
    const Buffer<float>& src = is_fg ? fg : bg;
    for (size_t i = 0; i < n; ++i) out[i] = src[i * 3 + c] * (is_fg ? alpha.v[i] : 1.f - alpha.v[i]);
    box_mean(out.data(), out.data(), w, h, radius);  // in place
  });
  f_hat.resize(n * 3);
  b_hat.resize(n * 3);
  parallel_rows(h, [&](int first, int end) {
    for (size_t i = static_cast<size_t>(first) * w; i < static_cast<size_t>(end) * w; ++i) {
      const float wa = blurred_a[i], wb = 1.f - blurred_a[i];
      for (int c = 0; c < 3; ++c) {
        f_hat[i * 3 + c] = wa > 1e-5f ? fa[c][i] / wa : fg[i * 3 + c];
        b_hat[i * 3 + c] = wb > 1e-5f ? ba[c][i] / wb : bg[i * 3 + c];
      }
    }
  });
}

// Box-averages interleaved 8-bit RGB and alpha by an integer factor (partial blocks at the edges).
void shrink_by(const uint8_t* rgb, const Plane& alpha, int factor, Buffer<float>& image, Plane& small_alpha) {
  const int w = alpha.width, h = alpha.height;
  const int sw = (w + factor - 1) / factor, sh = (h + factor - 1) / factor;
  small_alpha = Plane(sw, sh);
  image.assign(static_cast<size_t>(sw) * sh * 3, 0.f);
  parallel_rows(sh, [&](int sy_begin, int sy_end) {
    std::vector<float> count(sw);
    for (int sy = sy_begin; sy < sy_end; ++sy) {
      std::fill(count.begin(), count.end(), 0.f);
      float* img_row = image.data() + static_cast<size_t>(sy) * sw * 3;
      float* a_row = small_alpha.row(sy);
      for (int y = sy * factor; y < std::min(h, (sy + 1) * factor); ++y) {
        const uint8_t* px = rgb + static_cast<size_t>(y) * w * 3;
        const float* a = alpha.row(y);
        for (int x = 0; x < w; ++x) {
          const int sx = x / factor;
          img_row[sx * 3] += px[x * 3];
          img_row[sx * 3 + 1] += px[x * 3 + 1];
          img_row[sx * 3 + 2] += px[x * 3 + 2];
          a_row[sx] += a[x];
          count[sx] += 1;
        }
      }
      for (int sx = 0; sx < sw; ++sx) {
        for (int c = 0; c < 3; ++c) img_row[sx * 3 + c] /= count[sx] * 255.f;
        a_row[sx] /= count[sx];
      }
    }
  });
}

}  // namespace

void estimate_foreground(Buffer<uint8_t>& rgb, const Plane& alpha) {
  const int w = alpha.width, h = alpha.height;
  const size_t n = static_cast<size_t>(w) * h;
  // Only semi-transparent pixels get a new colour; with none, the blurs below are not needed.
  if (std::none_of(alpha.v.begin(), alpha.v.end(), [](float a) { return a > 0.f && a < 1.f; })) return;
  // The blurred estimates are smooth, so they are computed at a bounded working resolution and
  // sampled bilinearly; the final correction uses the full-resolution colour and alpha.
  const int factor =
      n <= kForegroundFullPixels ? 1 : std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n) / kForegroundWorkPixels))));
  Buffer<float> image;
  Plane work_alpha;
  shrink_by(rgb.data(), alpha, factor, image, work_alpha);
  const size_t wn = work_alpha.v.size();
  const int sw = work_alpha.width, sh = work_alpha.height;
  // Radii from the paper (90 then 6 px) are for images of about 1 MP; scale them with the image.
  const double scale = std::sqrt(static_cast<double>(wn) / 1e6);
  const int large = std::max(3, static_cast<int>(std::lround(90 * scale)));
  const int small = std::max(1, static_cast<int>(std::lround(6 * scale)));
  Buffer<float> fg = image, bg = image, f_hat, b_hat;
  weighted_means(fg, bg, work_alpha, large, f_hat, b_hat);
  parallel_rows(sh, [&](int first, int end) {  // first blur-fusion step, at working resolution
    for (size_t i = static_cast<size_t>(first) * sw; i < static_cast<size_t>(end) * sw; ++i) {
      const float a = work_alpha.v[i];
      for (int c = 0; c < 3; ++c) {
        const float residual = image[i * 3 + c] - a * f_hat[i * 3 + c] - (1.f - a) * b_hat[i * 3 + c];
        fg[i * 3 + c] = std::clamp(f_hat[i * 3 + c] + a * residual, 0.f, 1.f);
        bg[i * 3 + c] = std::clamp(b_hat[i * 3 + c] + (1.f - a) * residual, 0.f, 1.f);
      }
    }
  });
  weighted_means(fg, bg, work_alpha, small, f_hat, b_hat);  // second step's estimates
  // Each pixel reads only its own colour before writing it: the correction runs in place, by rows.
  parallel_rows(h, [&](int first, int end) {
    for (int y = first; y < end; ++y) {
      const float fy = std::clamp((y + 0.5f) / factor - 0.5f, 0.f, static_cast<float>(sh - 1));
      const int y0 = static_cast<int>(fy), y1 = std::min(y0 + 1, sh - 1);
      const float ty = fy - y0;
      const float* alpha_row = alpha.row(y);
      uint8_t* px = rgb.data() + static_cast<size_t>(y) * w * 3;
      for (int x = 0; x < w; ++x) {
        const float a = alpha_row[x];
        if (!(a > 0.f && a < 1.f)) continue;
        const float fx = std::clamp((x + 0.5f) / factor - 0.5f, 0.f, static_cast<float>(sw - 1));
        const int x0 = static_cast<int>(fx), x1 = std::min(x0 + 1, sw - 1);
        const float tx = fx - x0;
        const size_t i00 = (static_cast<size_t>(y0) * sw + x0) * 3, i01 = (static_cast<size_t>(y0) * sw + x1) * 3;
        const size_t i10 = (static_cast<size_t>(y1) * sw + x0) * 3, i11 = (static_cast<size_t>(y1) * sw + x1) * 3;
        for (int c = 0; c < 3; ++c) {
          auto sample = [&](const Buffer<float>& p) {
            const float top = p[i00 + c] + (p[i01 + c] - p[i00 + c]) * tx;
            const float bottom = p[i10 + c] + (p[i11 + c] - p[i10 + c]) * tx;
            return top + (bottom - top) * ty;
          };
          const float f = sample(f_hat), b = sample(b_hat);
          const float residual = px[x * 3 + c] / 255.f - a * f - (1.f - a) * b;
          px[x * 3 + c] = unit_to_byte(f + a * residual);
        }
      }
    }
  });
}

}  // namespace bgone
