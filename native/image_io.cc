#include "image_io.h"

#include <vips/vips.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "decode_progress.h"
#include "errors.h"
#include "jpeg_scan.h"
#include "model_resample.h"
#include "parallel.h"

namespace bgone {
namespace {

// Owns one VipsImage reference.
struct VipsRef {
  VipsImage* image = nullptr;
  VipsRef() = default;
  explicit VipsRef(VipsImage* i) : image(i) {}
  VipsRef(const VipsRef&) = delete;
  VipsRef& operator=(const VipsRef&) = delete;
  VipsRef(VipsRef&& other) noexcept : image(other.image) { other.image = nullptr; }
  VipsRef& operator=(VipsRef&& other) noexcept {
    if (this != &other) {
      reset();
      image = other.image;
      other.image = nullptr;
    }
    return *this;
  }
  ~VipsRef() { reset(); }
  void reset() {
    if (image != nullptr) g_object_unref(image);
    image = nullptr;
  }
  VipsImage* get() const { return image; }
};

// libvips reports failures through a global error buffer; take its text and clear it.
std::string take_vips_error() {
  std::string message = vips_error_buffer();
  vips_error_clear();
  if (message.size() > 500) message.resize(500);
  return message;
}

[[noreturn]] void fail(ErrorCode code, const char* what) { throw PipelineError(code, std::string(what) + ": " + take_vips_error()); }

// How strict the loaders are. TRUNCATED let libpng skip every CRC and zlib's Adler-32: a PNG with a
// corrupt IHDR or IDAT decoded as if nothing were wrong. ERROR checks them; for JPEG it is the same
// as TRUNCATED. WARNING is not used: libjpeg warns about harmless oddities that real camera files
// carry (e.g. extraneous bytes before a marker), and those must still decode. What libjpeg only
// warns about but the contract calls broken is refused before: a scan with no data in
// src/lib/header-size.ts, scan data that end early in native/jpeg_scan.cc.
constexpr VipsFailOn kFailOn = VIPS_FAIL_ON_ERROR;

// Opens the bytes with the loader chosen by sniffing, never a generic one. Sequential access and
// explicit materialisation in memory keep libvips from decoding to a temporary file.
VipsRef open_image(const uint8_t* data, size_t length, InputFormat format) {
  VipsImage* out = nullptr;
  void* buf = const_cast<uint8_t*>(data);  // the loaders do not write to it
  int rc = -1;
  switch (format) {
    case InputFormat::Jpeg:
      rc = vips_jpegload_buffer(buf, length, &out, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", kFailOn, nullptr);
      break;
    case InputFormat::Png:
      rc = vips_pngload_buffer(buf, length, &out, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", kFailOn, nullptr);
      break;
    case InputFormat::Webp:
      rc = vips_webpload_buffer(buf, length, &out, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", kFailOn, nullptr);
      break;
  }
  if (rc != 0) fail(ErrorCode::InvalidImage, "cannot read the image header");
  return VipsRef(out);
}

// Decodes all pixels now, into memory. Errors in the compressed data surface here.
VipsRef materialise(VipsImage* in, ErrorCode code, const char* what) {
  VipsImage* out = vips_image_copy_memory(in);
  if (out == nullptr) fail(code, what);
  return VipsRef(out);
}

// Converts whatever the loader produced (CMYK, grey, 16-bit, palette-expanded, with or without alpha)
// to 8-bit sRGB with an optional fourth alpha band. Grey+alpha becomes RGB+alpha.
VipsRef to_srgb8(VipsImage* in) {
  VipsRef current;
  VipsImage* cur = in;
  VipsInterpretation interpretation = vips_image_guess_interpretation(cur);
  bool needs_colourspace = interpretation != VIPS_INTERPRETATION_sRGB || vips_image_get_format(cur) != VIPS_FORMAT_UCHAR || cur->Bands < 3;
  if (needs_colourspace) {
    VipsImage* out = nullptr;
    if (vips_colourspace(cur, &out, VIPS_INTERPRETATION_sRGB, nullptr) != 0) fail(ErrorCode::InvalidImage, "colour conversion failed");
    current = VipsRef(out);
    cur = out;
  }
  if (vips_image_get_format(cur) != VIPS_FORMAT_UCHAR) {
    VipsImage* out = nullptr;
    if (vips_cast_uchar(cur, &out, nullptr) != 0) fail(ErrorCode::InvalidImage, "cast failed");
    current = VipsRef(out);
    cur = out;
  }
  if (cur->Bands > 4 || cur->Bands == 2) {
    // e.g. CMYK+alpha converted, or extra bands: keep RGB and the last band as alpha if any.
    VipsImage* rgb = nullptr;
    if (vips_extract_band(cur, &rgb, 0, "n", 3, nullptr) != 0) fail(ErrorCode::InvalidImage, "band extraction failed");
    VipsRef rgb_ref(rgb);
    if (cur->Bands >= 4) {
      VipsImage* alpha = nullptr;
      if (vips_extract_band(cur, &alpha, cur->Bands - 1, nullptr) != 0) fail(ErrorCode::InvalidImage, "band extraction failed");
      VipsRef alpha_ref(alpha);
      VipsImage* joined = nullptr;
      if (vips_bandjoin2(rgb, alpha, &joined, nullptr) != 0) fail(ErrorCode::InvalidImage, "band join failed");
      current = VipsRef(joined);
    } else {
      current = std::move(rgb_ref);
    }
    cur = current.get();
  }
  if (current.get() == nullptr) {
    g_object_ref(in);
    return VipsRef(in);
  }
  return current;
}

VipsRef autorotate(VipsImage* in) {
  VipsImage* out = nullptr;
  if (vips_autorot(in, &out, nullptr) != 0) fail(ErrorCode::InvalidImage, "orientation failed");
  return VipsRef(out);
}

// Resamples to exactly width x height (libvips may round a side by one pixel; the last row or
// column is then repeated). Returns an empty ref when the image already has that size.
VipsRef resize_exact(VipsImage* in, int width, int height) {
  if (in->Xsize == width && in->Ysize == height) return VipsRef();
  VipsImage* out = nullptr;
  if (vips_resize(in, &out, static_cast<double>(width) / in->Xsize, "vscale", static_cast<double>(height) / in->Ysize, nullptr) != 0) {
    fail(ErrorCode::Internal, "resize failed");
  }
  VipsRef resized(out);
  if (out->Xsize == width && out->Ysize == height) return resized;
  VipsImage* exact = nullptr;
  if (vips_embed(out, &exact, 0, 0, width, height, "extend", VIPS_EXTEND_COPY, nullptr) != 0) fail(ErrorCode::Internal, "resize failed");
  return VipsRef(exact);
}

// Writes `in` into `target` at once (libvips' workers); its rows are all there only at the end.
bool write_whole(VipsImage* in, VipsImage* target, DecodeProgress* progress) {
  if (vips_image_write(in, target) != 0) return false;
  if (progress != nullptr) progress->publish(target->Ysize);
  return true;
}

// Writes `in` into `target` (an image over memory of ours) strip after strip, on one libvips thread
// while the caller waits. For a JPEG, instead of vips_image_write's worker threads: a JPEG decodes
// in order whatever the threads, and handing its strips from one worker to the next cost more than
// it saved (each hand-over a wake-up through the hypervisor: a 12 MP decode 20 % longer). A
// libvips thread, because only those keep region buffers from one strip to the next (libvips'
// buffer cache is per libvips thread); on any other thread every strip allocated and zeroed its
// buffers again. A PNG keeps the workers: its rows come out of zlib one by one, and the workers'
// copying beside it pays.
constexpr int kStripRows = 16;  // whole MCU rows of any JPEG (8 or 16 pixels high)

bool write_in_strips(VipsImage* in, VipsImage* target, DecodeProgress* progress) {
  struct Work {
    VipsImage* in;
    VipsImage* target;
    DecodeProgress* progress;
    std::mutex mutex;
    std::condition_variable done;
    bool finished = false, ok = false;
  } work;
  work.in = in;
  work.target = target;
  work.progress = progress;
  auto run = [](gpointer data, gpointer) {
    Work& w = *static_cast<Work*>(data);
    VipsRegion* from = vips_region_new(w.in);
    VipsRegion* to = vips_region_new(w.target);
    bool ok = from != nullptr && to != nullptr;
    for (int y = 0; ok && y < w.in->Ysize; y += kStripRows) {
      VipsRect rows{0, y, w.in->Xsize, std::min(kStripRows, w.in->Ysize - y)};
      ok = vips_region_image(to, &rows) == 0 && vips_region_prepare_to(from, to, &rows, 0, y) == 0;
      if (ok && w.progress != nullptr) w.progress->publish(y + rows.height);
    }
    if (from != nullptr) g_object_unref(from);
    if (to != nullptr) g_object_unref(to);
    // Told under the lock: the caller, whose stack holds `w`, returns only once it is released.
    std::lock_guard<std::mutex> lock(w.mutex);
    w.ok = ok;
    w.finished = true;
    w.done.notify_one();
  };
  if (vips_thread_execute("bgone decode", run, &work) != 0) return write_whole(in, target, progress);
  std::unique_lock<std::mutex> lock(work.mutex);
  work.done.wait(lock, [&work] { return work.finished; });
  return work.ok;
}

// How an image is computed into memory of ours: by vips_image_write's workers, or in strips on one
// libvips thread (write_in_strips, for JPEG decodes).
enum class Writer { Workers, Strips };

bool write_pixels(VipsImage* in, VipsImage* target, Writer writer, DecodeProgress* progress = nullptr) {
  return writer == Writer::Strips ? write_in_strips(in, target, progress) : write_whole(in, target, progress);
}

// Renders the image straight into a buffer we own (libvips writes into it: no second copy).
void copy_pixels(VipsImage* in, Pixels& out, ErrorCode code, Writer writer = Writer::Workers) {
  out.width = in->Xsize;
  out.height = in->Ysize;
  out.bands = in->Bands;
  out.data.resize(VIPS_IMAGE_SIZEOF_IMAGE(in));
  VipsImage* target = vips_image_new_from_memory(out.data.data(), out.data.size(), in->Xsize, in->Ysize, in->Bands, in->BandFmt);
  if (target == nullptr) fail(code, "decode failed");
  VipsRef target_ref(target);
  if (!write_pixels(in, target, writer)) fail(code, "decode failed");
}

}  // namespace

struct DecodedImage {
  Buffer<uint8_t> pixels;  // declared first: `image` wraps it and must go first
  VipsRef image;           // in memory, 8-bit sRGB, 3 or 4 bands
};

void DecodedDeleter::operator()(DecodedImage* image) const { delete image; }
int decoded_width(const DecodedImage& image) { return image.image.get()->Xsize; }
int decoded_height(const DecodedImage& image) { return image.image.get()->Ysize; }
int decoded_bands(const DecodedImage& image) { return image.image.get()->Bands; }
const uint8_t* decoded_pixels(const DecodedImage& image) { return image.pixels.data(); }

void init_vips() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Images must never reach the disk: raise the threshold above which libvips would decode to a
    // temporary file (we also always decode sequentially into memory).
    setenv("VIPS_DISC_THRESHOLD", "1000gb", 1);
    if (VIPS_INIT("bgone") != 0) throw PipelineError(ErrorCode::Internal, "libvips failed to start: " + take_vips_error());
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    // Loaders marked untrusted (ImageMagick, MATLAB, ...) are blocked process-wide. Our own code
    // never lets libvips choose a loader: it calls the JPEG, PNG or WebP loader the sniff picked.
    // The other loaders stay available because the host process may share this libvips (sharp).
    vips_block_untrusted_set(TRUE);
  });
}

InputFormat sniff_format(const uint8_t* d, size_t n) {
  if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return InputFormat::Jpeg;
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (n >= 8 && std::memcmp(d, png, 8) == 0) return InputFormat::Png;
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0) return InputFormat::Webp;
  throw PipelineError(ErrorCode::UnsupportedMediaType, "not a JPEG, PNG or WebP file");
}

HeaderInfo read_header(const uint8_t* data, size_t length, InputFormat format, int max_side) {
  VipsRef image = open_image(data, length, format);
  HeaderInfo info;
  bool swap = vips_image_get_orientation_swap(image.get());
  info.width = swap ? image.get()->Ysize : image.get()->Xsize;
  info.height = swap ? image.get()->Xsize : image.get()->Ysize;
  info.alpha = vips_image_hasalpha(image.get()) != 0;
  if (info.width > max_side || info.height > max_side) {
    throw PipelineError(ErrorCode::ImageTooLarge, "image is " + std::to_string(info.width) + "x" + std::to_string(info.height));
  }
  if (info.width < 1 || info.height < 1) throw PipelineError(ErrorCode::InvalidImage, "image has no pixels");
  return info;
}

InputMetadata read_metadata(const uint8_t* data, size_t length, InputFormat format) {
  VipsRef image = open_image(data, length, format);
  InputMetadata meta;
  auto blob = [&](const char* name, std::vector<uint8_t>& out) {
    const void* bytes = nullptr;
    size_t size = 0;
    if (vips_image_get_typeof(image.get(), name) != 0 && vips_image_get_blob(image.get(), name, &bytes, &size) == 0 && bytes != nullptr) {
      out.assign(static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
    }
    vips_error_clear();
  };
  blob(VIPS_META_XMP_NAME, meta.xmp);
  blob(VIPS_META_EXIF_NAME, meta.exif);
  blob(VIPS_META_ICC_NAME, meta.icc);
  return meta;
}

namespace {

// Flattens alpha on white and stretches to exactly width x height: the model's input. Two ways,
// both with a Lanczos-3 kernel: an image already decoded in memory goes through our resampler
// (model_resample.h), on the free cores; a loader shrinking on load streams into libvips' resize
// (below), which works on strips as the loader decodes them and never holds the shrunk image
// whole. Ours there would need it whole first, beside the full decode on the other core, and was
// slower for it.
Pixels model_input_from(VipsImage* in, int width, int height, Writer writer) {
  VipsRef srgb = to_srgb8(in);
  VipsImage* cur = srgb.get();
  VipsRef flat;
  if (cur->Bands == 4) {
    VipsArrayDouble* white = vips_array_double_newv(3, 255.0, 255.0, 255.0);
    VipsImage* out = nullptr;
    int rc = vips_flatten(cur, &out, "background", white, nullptr);
    vips_area_unref(VIPS_AREA(white));
    if (rc != 0) fail(ErrorCode::InvalidImage, "flatten failed");
    flat = VipsRef(out);
    cur = out;
  }
  VipsRef resized = resize_exact(cur, width, height);
  if (resized.get() != nullptr) cur = resized.get();
  Pixels pixels;
  copy_pixels(cur, pixels, ErrorCode::InvalidImage, writer);
  if (pixels.width != width || pixels.height != height || pixels.bands != 3) {
    throw PipelineError(ErrorCode::Internal, "model input has an unexpected shape");
  }
  return pixels;
}

// Shrink-on-load: JPEG decodes at 1/2, 1/4 or 1/8 scale in the DCT, WebP scales while decoding,
// as long as the result still has at least the model's resolution. (The header's sides are after
// EXIF orientation; the tests below treat both sides alike, so the stored orientation does not matter.)
int jpeg_shrink(const HeaderInfo& header, int target) {
  int shrink = 1;
  while (shrink < 8 && header.width / (shrink * 2) >= target && header.height / (shrink * 2) >= target) shrink *= 2;
  return shrink;
}

double webp_scale(const HeaderInfo& header, int target) {
  return std::min(1.0, std::max(static_cast<double>(target) / header.width, static_cast<double>(target) / header.height));
}

}  // namespace

bool shrinks_on_load(InputFormat format, const HeaderInfo& header, int width, int height) {
  const int target = std::max(width, height);
  switch (format) {
    case InputFormat::Jpeg:
      return jpeg_shrink(header, target) > 1;
    case InputFormat::Webp:
      return webp_scale(header, target) < 1.0;
    case InputFormat::Png:
      break;
  }
  return false;
}

Pixels decode_for_model(const uint8_t* data, size_t length, InputFormat format, const HeaderInfo& header, int width, int height) {
  // The loader is the sniffed one, never one libvips would pick by itself.
  VipsImage* loaded = nullptr;
  void* buf = const_cast<uint8_t*>(data);
  int rc = -1;
  const int target = std::max(width, height);
  switch (format) {
    case InputFormat::Jpeg:
      rc = vips_jpegload_buffer(buf, length, &loaded, "shrink", jpeg_shrink(header, target), "access", VIPS_ACCESS_SEQUENTIAL, "fail_on",
                                kFailOn, nullptr);
      break;
    case InputFormat::Webp:
      rc = vips_webpload_buffer(buf, length, &loaded, "scale", webp_scale(header, target), "access", VIPS_ACCESS_SEQUENTIAL, "fail_on",
                                kFailOn, nullptr);
      break;
    case InputFormat::Png:
      rc = vips_pngload_buffer(buf, length, &loaded, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", kFailOn, nullptr);
      break;
  }
  if (rc != 0) fail(ErrorCode::InvalidImage, "decode failed");
  VipsRef loaded_ref(loaded);
  // Upright (most photos): the loader feeds the resize directly, strip by strip (a JPEG's on one
  // libvips thread, write_in_strips), and the shrunk image (9 MB at 12 MP) is never held whole.
  // Rotation needs the whole image in memory: only then is it materialised.
  const Writer writer = format == InputFormat::Jpeg ? Writer::Strips : Writer::Workers;
  if (vips_image_get_orientation(loaded) <= 1) return model_input_from(loaded, width, height, writer);
  VipsRef decoded = materialise(loaded, ErrorCode::InvalidImage, "decode failed");
  loaded_ref.reset();
  VipsRef rotated = autorotate(decoded.get());
  return model_input_from(rotated.get(), width, height, writer);
}

Pixels model_input_from_decoded(const DecodedImage& image, const Region* region, int width, int height) {
  const VipsImage* in = image.image.get();
  // decode_full made it 8-bit sRGB with 3 or 4 bands.
  if (in->Bands != 3 && in->Bands != 4) throw PipelineError(ErrorCode::Internal, "decoded image has an unexpected shape");
  if (region == nullptr) return resample_for_model(image.pixels.data(), in->Xsize, in->Ysize, in->Bands, width, height);
  const Region& r = *region;
  if (r.x < 0 || r.y < 0 || r.w < 1 || r.h < 1 || r.x + r.w > in->Xsize || r.y + r.h > in->Ysize)
    throw PipelineError(ErrorCode::Internal, "the region of interest is not inside the image");
  const size_t stride = static_cast<size_t>(in->Xsize) * in->Bands;
  const uint8_t* first = image.pixels.data() + static_cast<size_t>(r.y) * stride + static_cast<size_t>(r.x) * in->Bands;
  return resample_for_model(first, r.w, r.h, in->Bands, width, height, stride);
}

namespace {

// bg_fit=contain: `image` (8-bit sRGB, 3 or 4 bands) fitted inside width x height keeping its
// ratio, centred on a transparent canvas of that size: 4 bands.
Pixels contained(VipsImage* image, int width, int height) {
  const double scale = std::min(static_cast<double>(width) / image->Xsize, static_cast<double>(height) / image->Ysize);
  const int fw = std::clamp(static_cast<int>(std::lround(image->Xsize * scale)), 1, width);
  const int fh = std::clamp(static_cast<int>(std::lround(image->Ysize * scale)), 1, height);
  VipsRef exact = resize_exact(image, fw, fh);
  Pixels fitted;
  copy_pixels(exact.get() != nullptr ? exact.get() : image, fitted, ErrorCode::InvalidImage);
  if (fitted.width != fw || fitted.height != fh || (fitted.bands != 3 && fitted.bands != 4))
    throw PipelineError(ErrorCode::Internal, "background has an unexpected shape");
  Pixels out;
  out.width = width;
  out.height = height;
  out.bands = 4;
  out.data.assign(static_cast<size_t>(width) * height * 4, 0);
  const int x0 = (width - fw) / 2, y0 = (height - fh) / 2;
  for (int y = 0; y < fh; ++y) {
    const uint8_t* in = fitted.data.data() + static_cast<size_t>(y) * fw * fitted.bands;
    uint8_t* px = out.data.data() + (static_cast<size_t>(y0 + y) * width + x0) * 4;
    for (int x = 0; x < fw; ++x, in += fitted.bands, px += 4) {
      px[0] = in[0];
      px[1] = in[1];
      px[2] = in[2];
      px[3] = fitted.bands == 4 ? in[3] : 255;
    }
  }
  return out;
}

}  // namespace

Pixels shrink_box(const DecodedImage& decoded, int x, int y, int w, int h, int factor) {
  const VipsImage* in = decoded.image.get();
  // decode_full made it 8-bit sRGB with 3 or 4 bands, in `pixels`; read in place.
  const int bands = in->Bands;
  if (bands != 3 && bands != 4) throw PipelineError(ErrorCode::Internal, "decoded image has an unexpected shape");
  if (x < 0 || y < 0 || w < 1 || h < 1 || x + w > in->Xsize || y + h > in->Ysize || factor < 1)
    throw PipelineError(ErrorCode::Internal, "the box to shrink is outside the image");
  const size_t stride = static_cast<size_t>(in->Xsize) * bands;
  Pixels out;
  out.width = (w + factor - 1) / factor;
  out.height = (h + factor - 1) / factor;
  out.bands = 3;
  out.data.resize(static_cast<size_t>(out.width) * out.height * 3);
  parallel_rows(out.height, [&](int first, int end) {
    std::vector<uint64_t> sums(static_cast<size_t>(out.width) * 3);
    for (int oy = first; oy < end; ++oy) {
      std::fill(sums.begin(), sums.end(), 0);
      const int y0 = y + oy * factor, y1 = std::min(y + h, y0 + factor);
      for (int yy = y0; yy < y1; ++yy) {
        const uint8_t* row = decoded.pixels.data() + static_cast<size_t>(yy) * stride + static_cast<size_t>(x) * bands;
        for (int ox = 0; ox < out.width; ++ox) {
          uint64_t* sum = sums.data() + static_cast<size_t>(ox) * 3;
          const int x1 = std::min(w, (ox + 1) * factor);
          for (int xx = ox * factor; xx < x1; ++xx) {
            const uint8_t* p = row + static_cast<size_t>(xx) * bands;
            if (bands == 3) {
              for (int c = 0; c < 3; ++c) sum[c] += p[c];
            } else {  // flattened on white
              for (int c = 0; c < 3; ++c) sum[c] += (p[c] * p[3] + 255 * (255 - p[3]) + 127) / 255;
            }
          }
        }
      }
      uint8_t* o = out.data.data() + static_cast<size_t>(oy) * out.width * 3;
      for (int ox = 0; ox < out.width; ++ox) {
        const uint64_t count = static_cast<uint64_t>(std::min(w, (ox + 1) * factor) - ox * factor) * (y1 - y0);
        for (int c = 0; c < 3; ++c) o[ox * 3 + c] = static_cast<uint8_t>((sums[static_cast<size_t>(ox) * 3 + c] + count / 2) / count);
      }
    }
  });
  return out;
}

Pixels decode_background(const uint8_t* data, size_t length, int max_side, int width, int height, bool contain) {
  const InputFormat format = sniff_format(data, length);
  const HeaderInfo header = read_header(data, length, format, max_side);
  if (format == InputFormat::Jpeg) check_jpeg_scans(data, length);
  // Scaled to cover width x height (the larger of the two ratios), cropped about its centre; with
  // `contain`, to fit inside it (the smaller ratio). JPEG and WebP shrink on load as far as that
  // size allows; the loader is the sniffed one, as strict as for an input.
  const double wide = static_cast<double>(width) / header.width, high = static_cast<double>(height) / header.height;
  const double cover = contain ? std::min(wide, high) : std::max(wide, high);
  VipsImage* loaded = nullptr;
  void* buf = const_cast<uint8_t*>(data);
  int rc = -1;
  switch (format) {
    case InputFormat::Jpeg: {
      int shrink = 1;
      while (shrink < 8 && cover * shrink * 2 <= 1.0) shrink *= 2;
      rc = vips_jpegload_buffer(buf, length, &loaded, "shrink", shrink, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", kFailOn, nullptr);
      break;
    }
    case InputFormat::Webp:
      rc = vips_webpload_buffer(buf, length, &loaded, "scale", std::min(1.0, cover), "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", kFailOn,
                                nullptr);
      break;
    case InputFormat::Png:
      rc = vips_pngload_buffer(buf, length, &loaded, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", kFailOn, nullptr);
      break;
  }
  if (rc != 0) fail(ErrorCode::InvalidImage, "cannot read the background image");
  VipsRef current(loaded);
  if (vips_image_get_orientation(loaded) > 1) {
    VipsRef decoded = materialise(loaded, ErrorCode::InvalidImage, "decode failed");
    current = autorotate(decoded.get());
  }
  VipsRef srgb = to_srgb8(current.get());
  VipsImage* cur = srgb.get();
  if (contain) return contained(cur, width, height);
  // The centred part of the canvas' proportions, then exactly the canvas' size.
  const double w = cur->Xsize, h = cur->Ysize;
  const int cw = std::clamp(static_cast<int>(std::lround(std::min(w, h * width / height))), 1, cur->Xsize);
  const int ch = std::clamp(static_cast<int>(std::lround(std::min(h, w * height / width))), 1, cur->Ysize);
  VipsRef area;
  if (cw != cur->Xsize || ch != cur->Ysize) {
    VipsImage* out = nullptr;
    if (vips_extract_area(cur, &out, (cur->Xsize - cw) / 2, (cur->Ysize - ch) / 2, cw, ch, nullptr) != 0)
      fail(ErrorCode::Internal, "background crop failed");
    area = VipsRef(out);
    cur = out;
  }
  VipsRef exact = resize_exact(cur, width, height);
  if (exact.get() != nullptr) cur = exact.get();
  Pixels pixels;
  copy_pixels(cur, pixels, ErrorCode::InvalidImage);
  if (pixels.width != width || pixels.height != height || (pixels.bands != 3 && pixels.bands != 4))
    throw PipelineError(ErrorCode::Internal, "background has an unexpected shape");
  return pixels;
}

DecodedPtr decode_full(const uint8_t* data, size_t length, InputFormat format, DecodeProgress* progress) {
  // However the decode ends, a reader waiting on `progress` learns that no more rows will come.
  struct Finish {
    DecodeProgress* progress;
    ~Finish() {
      if (progress != nullptr) progress->finish();
    }
  } finish{progress};
  VipsRef opened = open_image(data, length, format);
  // Rotation needs the whole image in memory (the loader reads sequentially): only images with an
  // EXIF orientation are materialised first. Upright ones go straight from the loader to the buffer.
  VipsRef rotated;
  if (vips_image_get_orientation(opened.get()) > 1) {
    VipsRef decoded = materialise(opened.get(), ErrorCode::InvalidImage, "decode failed");
    rotated = autorotate(decoded.get());
  } else {
    rotated = std::move(opened);
  }
  opened.reset();
  VipsRef srgb = to_srgb8(rotated.get());
  rotated.reset();
  // Decoded (and colour-converted, lazily) straight into a buffer of ours: one pass over the
  // pixels, into memory on huge pages (buffers.h) instead of libvips' own allocation.
  DecodedPtr result(new DecodedImage());
  VipsImage* in = srgb.get();
  result->pixels.resize(VIPS_IMAGE_SIZEOF_IMAGE(in));
  VipsImage* target =
      vips_image_new_from_memory(result->pixels.data(), result->pixels.size(), in->Xsize, in->Ysize, in->Bands, in->BandFmt);
  if (target == nullptr) fail(ErrorCode::InvalidImage, "decode failed");
  result->image = VipsRef(target);
  if (progress != nullptr) progress->start({result->pixels.data(), in->Xsize, in->Ysize, in->Bands});
  if (!write_pixels(in, target, format == InputFormat::Jpeg ? Writer::Strips : Writer::Workers, progress))
    fail(ErrorCode::InvalidImage, "decode failed");
  target->Type = in->Type;
  return result;
}

void crop_and_resize(DecodedImage& decoded, int x, int y, int w, int h, int out_w, int out_h, Pixels& rgb, Pixels& alpha) {
  VipsImage* src = decoded.image.get();
  VipsRef region;
  VipsImage* cur = src;
  if (x != 0 || y != 0 || w != src->Xsize || h != src->Ysize) {
    VipsImage* out = nullptr;
    // Where the box reaches past the image, repeat the edge: those pixels get alpha 0 later, and
    // repeated colour keeps the resampling and the colour estimation free of artificial edges.
    if (vips_embed(src, &out, -x, -y, w, h, "extend", VIPS_EXTEND_COPY, nullptr) != 0) fail(ErrorCode::Internal, "crop failed");
    region = VipsRef(out);
    cur = out;
  }
  VipsRef resized = resize_exact(cur, out_w, out_h);
  if (resized.get() != nullptr) cur = resized.get();
  Pixels all;
  if (cur == src) {
    // The whole image at its own size (no crop, no resize): its decoded pixels are the result's,
    // taken over rather than copied. `decoded` is not used again (run_job drops it next).
    all.width = src->Xsize;
    all.height = src->Ysize;
    all.bands = src->Bands;
    all.data = std::move(decoded.pixels);
  } else {
    copy_pixels(cur, all, ErrorCode::Internal);
  }
  const size_t n = static_cast<size_t>(out_w) * out_h;
  rgb.width = alpha.width = out_w;
  rgb.height = alpha.height = out_h;
  rgb.bands = 3;
  if (all.bands == 3) {
    rgb.data = std::move(all.data);
    alpha.bands = 0;
    alpha.data.clear();
    return;
  }
  rgb.data.resize(n * 3);
  alpha.bands = 1;
  alpha.data.resize(n);
  const uint8_t* s = all.data.data();
  for (size_t i = 0; i < n; ++i, s += 4) {
    rgb.data[i * 3] = s[0];
    rgb.data[i * 3 + 1] = s[1];
    rgb.data[i * 3 + 2] = s[2];
    alpha.data[i] = s[3];
  }
}

namespace {

// A JPEG from jpegsave (SOI, then no APP0: it writes none without metadata) with a JFIF APP0
// segment after its SOI giving `dpi` dots per inch on both axes, as libjpeg's own writer lays it
// out: version 1.02, unit 1 (inches), no thumbnail. `jpeg` is released.
Encoded with_jfif(Encoded& jpeg, int dpi) {
  const uint8_t* in = static_cast<const uint8_t*>(jpeg.data);
  if (jpeg.length < 4 || in[0] != 0xFF || in[1] != 0xD8 || (in[2] == 0xFF && in[3] == 0xE0)) {
    free_encoded(jpeg.data, jpeg.own);
    throw PipelineError(ErrorCode::Internal, "the JPEG does not start as jpegsave writes it");
  }
  const uint8_t d1 = static_cast<uint8_t>(dpi >> 8), d0 = static_cast<uint8_t>(dpi & 0xFF);
  const uint8_t app0[18] = {0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0x00, 0x01, 0x02, 0x01, d1, d0, d1, d0, 0x00, 0x00};
  Encoded out;
  out.length = jpeg.length + sizeof(app0);
  out.data = g_try_malloc(out.length);
  if (out.data == nullptr) {
    free_encoded(jpeg.data, jpeg.own);
    throw std::bad_alloc();
  }
  uint8_t* p = static_cast<uint8_t*>(out.data);
  std::memcpy(p, in, 2);
  std::memcpy(p + 2, app0, sizeof(app0));
  std::memcpy(p + 2 + sizeof(app0), in + 2, jpeg.length - 2);
  free_encoded(jpeg.data, jpeg.own);
  return out;
}

// Inserts APP1 segments (the EXIF block, then the XMP packet) after the JPEG's SOI and its APP0
// if there is one. A member too large for one segment is left out. `jpeg` is released.
Encoded with_app1(Encoded& jpeg, const OutputMetadata& meta) {
  static const char kExif[] = "Exif\0";                       // with the terminating NUL: "Exif\0\0"
  static const char kXmp[] = "http://ns.adobe.com/xap/1.0/";  // and its NUL
  std::vector<uint8_t> segments;
  auto add = [&](const char* id, size_t id_length, const std::vector<uint8_t>& body) {
    const size_t length = 2 + id_length + body.size();
    if (body.empty() || length > 0xFFFF) return;
    const uint8_t head[4] = {0xFF, 0xE1, static_cast<uint8_t>(length >> 8), static_cast<uint8_t>(length & 0xFF)};
    segments.insert(segments.end(), head, head + 4);
    segments.insert(segments.end(), id, id + id_length);
    segments.insert(segments.end(), body.begin(), body.end());
  };
  add(kExif, sizeof(kExif), meta.exif);
  add(kXmp, sizeof(kXmp), meta.xmp);
  const uint8_t* in = static_cast<const uint8_t*>(jpeg.data);
  if (jpeg.length < 4 || in[0] != 0xFF || in[1] != 0xD8) {
    free_encoded(jpeg.data, jpeg.own);
    throw PipelineError(ErrorCode::Internal, "the JPEG does not start as jpegsave writes it");
  }
  size_t after = 2;
  if (in[2] == 0xFF && in[3] == 0xE0 && jpeg.length >= 6) after = std::min(jpeg.length, 4 + static_cast<size_t>(in[4] << 8 | in[5]));
  Encoded out;
  out.length = jpeg.length + segments.size();
  out.data = g_try_malloc(out.length);
  if (out.data == nullptr) {
    free_encoded(jpeg.data, jpeg.own);
    throw std::bad_alloc();
  }
  uint8_t* p = static_cast<uint8_t*>(out.data);
  std::memcpy(p, in, after);
  if (!segments.empty()) std::memcpy(p + after, segments.data(), segments.size());
  std::memcpy(p + after + segments.size(), in + after, jpeg.length - after);
  free_encoded(jpeg.data, jpeg.own);
  return out;
}

// Sets a blob on the image (libvips copies it).
void set_blob(VipsImage* image, const char* name, const std::vector<uint8_t>& bytes) {
  if (!bytes.empty()) vips_image_set_blob_copy(image, name, bytes.data(), bytes.size());
}

}  // namespace

Encoded encode(const Pixels& pixels, const JobOptions& options, const OutputMetadata& meta) {
  VipsImage* image =
      vips_image_new_from_memory(pixels.data.data(), pixels.data.size(), pixels.width, pixels.height, pixels.bands, VIPS_FORMAT_UCHAR);
  if (image == nullptr) fail(ErrorCode::Internal, "cannot wrap the result");
  VipsRef image_ref(image);
  image->Type = pixels.bands <= 2 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;
  // The density, in pixels per millimetre as libvips keeps it: pngsave writes it as pHYs; webpsave
  // and heifsave only inside EXIF, which is then the one metadata kept (libvips makes it from the
  // image: its resolution, orientation 1 and nothing of the input). jpegsave without metadata
  // writes no JFIF header at all: with_jfif adds one.
  const bool dpi = options.dpi > 0;
  if (dpi) image->Xres = image->Yres = options.dpi / 25.4;
  // The metadata kept (metadata.h): for the savers other than JPEG's, set on the image and kept by
  // their `keep`. An EXIF block of ours goes as libvips holds one, with its "Exif\0\0" prefix;
  // libvips updates its resolution from the image's, the same as ours.
  int keep = dpi ? VIPS_FOREIGN_KEEP_EXIF : VIPS_FOREIGN_KEEP_NONE;
  if (options.format != OutputFormat::Jpeg) {
    if (!meta.exif.empty()) {
      std::vector<uint8_t> exif = {'E', 'x', 'i', 'f', 0, 0};
      exif.insert(exif.end(), meta.exif.begin(), meta.exif.end());
      set_blob(image, VIPS_META_EXIF_NAME, exif);
      keep |= VIPS_FOREIGN_KEEP_EXIF;
    }
    if (!meta.xmp.empty()) {
      set_blob(image, VIPS_META_XMP_NAME, meta.xmp);
      keep |= VIPS_FOREIGN_KEEP_XMP;
    }
    if (!meta.icc.empty() && options.format == OutputFormat::Png) {
      set_blob(image, VIPS_META_ICC_NAME, meta.icc);
      keep |= VIPS_FOREIGN_KEEP_ICC;
    }
  }
  const VipsForeignKeep exif_keep = static_cast<VipsForeignKeep>(keep);
  // PNG's pHYs is no EXIF: its own keep is the metadata alone.
  const VipsForeignKeep png_keep = static_cast<VipsForeignKeep>(keep & ~(dpi && meta.exif.empty() ? VIPS_FOREIGN_KEEP_EXIF : 0));
  Encoded out;
  int rc = -1;
  switch (options.format) {
    case OutputFormat::Png:
      // Low zlib effort with the "up" row filter: a photo's rows resemble the row above, so the
      // differences deflate well even at level 1, smaller than level 3 without filters in less time.
      rc = vips_pngsave_buffer(image, &out.data, &out.length, "compression", options.png_compression, "filter", VIPS_FOREIGN_PNG_FILTER_UP,
                               "keep", png_keep, nullptr);
      break;
    case OutputFormat::Jpeg:
      rc = vips_jpegsave_buffer(image, &out.data, &out.length, "Q", options.quality, "keep", VIPS_FOREIGN_KEEP_NONE, nullptr);
      break;
    case OutputFormat::Webp:
      rc = vips_webpsave_buffer(image, &out.data, &out.length, "Q", options.quality, "effort", 2, "keep", exif_keep, nullptr);
      break;
    case OutputFormat::Avif:
      // AV1 at libaom's fastest effort: at 2 MP effort 0 took 0.3 s here, 2 1.6 s and libvips'
      // default 4 11 s, for files within 15 % of each other's size.
      rc = vips_heifsave_buffer(image, &out.data, &out.length, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_AV1, "Q", options.quality,
                                "bitdepth", 8, "effort", 0, "keep", exif_keep, nullptr);
      break;
    case OutputFormat::Auto:  // decided before encoding (pipeline.cc encode_stage)
      fail(ErrorCode::Internal, "no format decided");
  }
  if (rc != 0) fail(ErrorCode::Internal, "encode failed");
  if (options.format == OutputFormat::Jpeg) {
    if (dpi) out = with_jfif(out, options.dpi);
    if (!meta.exif.empty() || !meta.xmp.empty()) out = with_app1(out, meta);
  }
  return out;
}

void free_encoded(void* data, bool own) {
  if (own) {
    free_output(data);
  } else {
    g_free(data);
  }
}

}  // namespace bgone
