#include "matting.h"

#include <algorithm>
#include <cmath>

namespace bgone {
namespace {

struct Tap {
  int first = 0;                // first source index
  std::vector<float> weights;   // normalised
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
  // Horizontal running sums into tmp, then vertical running sums; both O(1) per pixel.
  std::vector<float> tmp(static_cast<size_t>(w) * h);
  std::vector<double> acc(w);
  for (int y = 0; y < h; ++y) {
    const float* src = in + static_cast<size_t>(y) * w;
    float* dst = tmp.data() + static_cast<size_t>(y) * w;
    double sum = 0;
    for (int x = 0; x <= std::min(r, w - 1); ++x) sum += src[x];
    for (int x = 0; x < w; ++x) {
      const int lo = std::max(0, x - r), hi = std::min(w - 1, x + r);
      dst[x] = static_cast<float>(sum / (hi - lo + 1));
      if (x + r + 1 < w) sum += src[x + r + 1];
      if (x - r >= 0) sum -= src[x - r];
    }
  }
  std::fill(acc.begin(), acc.end(), 0.0);
  for (int y = 0; y <= std::min(r, h - 1); ++y) {
    const float* src = tmp.data() + static_cast<size_t>(y) * w;
    for (int x = 0; x < w; ++x) acc[x] += src[x];
  }
  for (int y = 0; y < h; ++y) {
    const int lo = std::max(0, y - r), hi = std::min(h - 1, y + r);
    const double inv = 1.0 / (hi - lo + 1);
    float* dst = out + static_cast<size_t>(y) * w;
    for (int x = 0; x < w; ++x) dst[x] = static_cast<float>(acc[x] * inv);
    if (y + r + 1 < h) {
      const float* add = tmp.data() + static_cast<size_t>(y + r + 1) * w;
      for (int x = 0; x < w; ++x) acc[x] += add[x];
    }
    if (y - r >= 0) {
      const float* sub = tmp.data() + static_cast<size_t>(y - r) * w;
      for (int x = 0; x < w; ++x) acc[x] -= sub[x];
    }
  }
}

GuidedCoefficients fit_guided(const uint8_t* rgb, const Plane& mask, int radius, double eps) {
  const int w = mask.width, h = mask.height;
  const size_t n = static_cast<size_t>(w) * h;
  // Products to average: I (3), p, I*p (3), I*I^T (6 unique).
  std::vector<float> ch[13];
  for (auto& c : ch) c.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float r = rgb[i * 3] / 255.f, g = rgb[i * 3 + 1] / 255.f, b = rgb[i * 3 + 2] / 255.f, p = mask.v[i];
    ch[0][i] = r; ch[1][i] = g; ch[2][i] = b; ch[3][i] = p;
    ch[4][i] = r * p; ch[5][i] = g * p; ch[6][i] = b * p;
    ch[7][i] = r * r; ch[8][i] = r * g; ch[9][i] = r * b; ch[10][i] = g * g; ch[11][i] = g * b; ch[12][i] = b * b;
  }
  std::vector<float> mean(n);
  for (auto& c : ch) {
    box_mean(c.data(), mean.data(), w, h, radius);
    c.swap(mean);
  }
  GuidedCoefficients k;
  for (auto& a : k.a) a = Plane(w, h);
  k.b = Plane(w, h);
  for (size_t i = 0; i < n; ++i) {
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
  for (Plane* p : {&k.a[0], &k.a[1], &k.a[2], &k.b}) {
    box_mean(p->v.data(), mean.data(), w, h, radius);
    p->v.swap(mean);
  }
  return k;
}

Plane apply_guided(const GuidedCoefficients& k, const uint8_t* rgb, int out_w, int out_h, AxisMap mx, AxisMap my) {
  Plane ar = resample_plane(k.a[0], out_w, out_h, mx, my);
  Plane ag = resample_plane(k.a[1], out_w, out_h, mx, my);
  Plane ab = resample_plane(k.a[2], out_w, out_h, mx, my);
  Plane q = resample_plane(k.b, out_w, out_h, mx, my);
  const size_t n = q.v.size();
  for (size_t i = 0; i < n; ++i) {
    const float v = q.v[i] + (ar.v[i] * rgb[i * 3] + ag.v[i] * rgb[i * 3 + 1] + ab.v[i] * rgb[i * 3 + 2]) * (1.f / 255.f);
    q.v[i] = std::clamp(v, 0.f, 1.f);
  }
  return q;
}

namespace {

// One blur-fusion step: F and B (interleaved 0..1 floats) are replaced by their alpha-weighted local
// means corrected so that alpha*F + (1-alpha)*B reproduces the image.
void blur_fusion_step(const std::vector<float>& image, const Plane& alpha, std::vector<float>& fg, std::vector<float>& bg, int radius) {
  const int w = alpha.width, h = alpha.height;
  const size_t n = static_cast<size_t>(w) * h;
  std::vector<float> tmp(n), blurred_a(n), fa[3], ba[3];
  box_mean(alpha.v.data(), blurred_a.data(), w, h, radius);
  for (int c = 0; c < 3; ++c) {
    fa[c].resize(n);
    ba[c].resize(n);
    for (size_t i = 0; i < n; ++i) tmp[i] = fg[i * 3 + c] * alpha.v[i];
    box_mean(tmp.data(), fa[c].data(), w, h, radius);
    for (size_t i = 0; i < n; ++i) tmp[i] = bg[i * 3 + c] * (1.f - alpha.v[i]);
    box_mean(tmp.data(), ba[c].data(), w, h, radius);
  }
  for (size_t i = 0; i < n; ++i) {
    const float a = alpha.v[i];
    const float wa = blurred_a[i], wb = 1.f - blurred_a[i];
    float f[3], b[3];
    for (int c = 0; c < 3; ++c) {
      f[c] = wa > 1e-5f ? fa[c][i] / wa : fg[i * 3 + c];
      b[c] = wb > 1e-5f ? ba[c][i] / wb : bg[i * 3 + c];
    }
    for (int c = 0; c < 3; ++c) {
      const float residual = image[i * 3 + c] - a * f[c] - (1.f - a) * b[c];
      fg[i * 3 + c] = std::clamp(f[c] + a * residual, 0.f, 1.f);
      bg[i * 3 + c] = std::clamp(b[c] + (1.f - a) * residual, 0.f, 1.f);
    }
  }
}

}  // namespace

std::vector<uint8_t> estimate_foreground(const uint8_t* rgb, const Plane& alpha) {
  const int w = alpha.width, h = alpha.height;
  const size_t n = static_cast<size_t>(w) * h;
  std::vector<uint8_t> out(rgb, rgb + n * 3);
  bool any_partial = false;
  for (size_t i = 0; i < n && !any_partial; ++i) any_partial = alpha.v[i] > 0.f && alpha.v[i] < 1.f;
  if (!any_partial) return out;
  std::vector<float> image(n * 3);
  for (size_t i = 0; i < n * 3; ++i) image[i] = rgb[i] * (1.f / 255.f);
  std::vector<float> fg = image, bg = image;
  // Radii from the paper (90 then 6 px) are for ~1 MP images; scale them with the image.
  const double scale = std::sqrt(static_cast<double>(n) / 1e6);
  const int large = std::max(3, static_cast<int>(std::lround(90 * scale)));
  const int small = std::max(1, static_cast<int>(std::lround(6 * scale)));
  blur_fusion_step(image, alpha, fg, bg, large);
  blur_fusion_step(image, alpha, fg, bg, small);
  for (size_t i = 0; i < n; ++i) {
    const float a = alpha.v[i];
    if (a <= 0.f || a >= 1.f) continue;
    for (int c = 0; c < 3; ++c) out[i * 3 + c] = static_cast<uint8_t>(std::lround(fg[i * 3 + c] * 255.f));
  }
  return out;
}

}  // namespace bgone
