// The one flat options struct that crosses from TypeScript into C++. Every field is set by
// read_options (addon.cc) from the object that normaliseOptions (src/lib/options.ts) builds: the
// defaults, the validation and the meaning of each value live there, once. The zero initialisers
// below are only there so that no field is ever indeterminate; none of them is a default.
#pragma once
#include <cstdint>

namespace bgone {

// Auto: PNG where the output has transparency, else JPEG. Avif: libvips' heifsave with AV1.
enum class OutputFormat { Png, Jpeg, Webp, Auto, Avif };
enum class CropMode { None, Subject, Aspect };
enum class ShadowKind { None, Drop, Contact };
// bg_blur (bg_blur.h): the blurred original behind the subject, and its kernel.
enum class BgBlur { None, Gaussian, Bokeh };
// The placement layout (pipeline.cc place()): its canvas is the exact canvas, the region's size, or the subject's box's size.
enum class PlacementCanvas { None, Canvas, Original, Subject };
// metadata (metadata.h): what of the input's metadata the output carries.
enum class MetadataMode { None, Xmp, ExifSubset, ExifSubsetXmp };

struct JobOptions {
  OutputFormat format = OutputFormat::Png;
  bool alpha_only = false;  // channels=alpha: a one-band grey mask
  // format=zip (with format Jpeg): the colours as the JPEG (the foreground colours, or composed on
  // the background where there is one), and the alpha as a one-band PNG beside it (JobResult::alpha).
  bool zip = false;
  bool has_background = false;  // bg_color given
  uint8_t background[4] = {};   // RGBA, when has_background
  double max_pixels = 0;        // size preset budget; never upscales
  CropMode crop = CropMode::None;
  uint32_t aspect_w = 0, aspect_h = 0;  // crop=W:H
  // The crop's margin on each side (top, right, bottom, left): round(share x subject width) + px.
  double padding_share[4] = {};
  double padding_px[4] = {};
  double scale = 0;                // 0: the subject keeps its size; else its larger share of the canvas
  bool has_position = false;       // else "original"
  double position[2] = {};         // x, y in 0..1: where the placed thing sits in the room left
  int canvas_w = 0, canvas_h = 0;  // 0: not set; else the exact output size
  // The placement layout: the reference box (the subject's box, or the whole region) fitted inside
  // (cover: covering) the target area, placed in it by `position` (centred without). The target
  // area is the canvas less its margins (shares of the canvas's height for top and bottom, of its
  // width for right and left, plus px), less its area padding (the same of the margin box). Where
  // the subject is cut by the region's edge and its axis snaps, that side has no area padding and
  // the subject sits on it. max_canvas_w/h (0: none) shrink a canvas made from the region or the
  // subject, keeping its ratio.
  PlacementCanvas placement = PlacementCanvas::None;
  int max_canvas_w = 0, max_canvas_h = 0;
  double margin_share[4] = {}, margin_px[4] = {};  // top, right, bottom, left
  double area_share[4] = {}, area_px[4] = {};
  bool cover = false;
  bool snap_x = false, snap_y = false;
  bool reference_image = false;
  bool has_roi = false;
  int roi[4] = {};         // x0, y0, x1, y1 in image pixels (after orientation), x1 and y1 exclusive
  int max_side = 0;        // checked from the header before decoding pixels
  bool refine = false;     // edge-aware matte upsampling + foreground colour estimation
  double min_subject = 0;  // share of the mask that must be subject, else foreground_not_found
  // Tuning knobs of the refinement (values chosen with bench/quality, kept in src/lib/options.ts).
  int guided_radius = 0;  // at the model's resolution
  double guided_eps = 0;
  float levels_low = 0;  // refined alpha below this becomes 0, above levels_high 1, linear between
  float levels_high = 0;
  // More inference for a better matte (effort=best). The model's answer for the mirrored image (run
  // when mirror_weight > 0) is combined with its answer for the image: their weighted mean (the
  // mirror's weight mirror_weight), moved towards their maximum by mirror_union (0: the mean, 1: the
  // maximum). Then an answer at a second square side, when set, is mixed in with second_weight
  // (dynamic-size models only).
  float mirror_weight = 0;
  float mirror_union = 0;
  int second_side = 0;
  float second_weight = 0;
  int inference_size = 0;  // side of the model's square input for this job; used when the model's size is dynamic
  // A shadow under the subject, composed between it and the background (shadow.h). Its sizes are
  // shares of the subject's larger side on the canvas. Drop: the matte moved by the offset and
  // blurred (the blur's standard deviation); contact: a flat soft band at the subject's base, the
  // columns of the matte's bottom band (contact_band high) spread into contact_height, blurred by
  // contact_blur.
  ShadowKind shadow = ShadowKind::None;
  float shadow_opacity = 0;
  double shadow_offset_x = 0, shadow_offset_y = 0, shadow_blur = 0;
  double contact_band = 0, contact_height = 0, contact_blur = 0;
  // semitransparency=false (interior.h): the mask made opaque where the subject encloses it, above
  // interior_min and at least interior_inset (a share of the mask's larger side) from what stays
  // transparent.
  bool opaque_interior = false;
  float interior_min = 0;
  double interior_inset = 0;
  // despill (despill.h): the key colour's spill limited on the band of the subject within
  // despill_band (a share of the subject's larger side) of the background; a key is green or blue
  // when that channel exceeds the larger other by despill_key_margin (0..1).
  bool despill = false;
  double despill_band = 0;
  float despill_key_margin = 0;
  // The effects of the outline and the background (outline.h, bg_blur.h; docs/contract.md,
  // "Effects"). An outline of outline_color (RGBA) under the subject: the subject dilated by
  // outline_width, its outer edge blurred by outline_blur (a Gaussian's standard deviation; 0: crisp,
  // antialiased), both shares of the canvas' larger side. bg_blur: the original photo, placed as the
  // subject is, blurred behind it (Gaussian: bg_blur_radius of the canvas' larger side is the
  // standard deviation; Bokeh: a flat disc of twice that radius). bg_contain: the background image
  // fitted inside the canvas (bg_fit=contain), else it covers it.
  bool outline = false;
  uint8_t outline_color[4] = {};
  double outline_width = 0, outline_blur = 0;
  BgBlur bg_blur = BgBlur::None;
  double bg_blur_radius = 0;
  bool bg_contain = false;
  int quality = 0;  // JPEG / WebP / AVIF quality
  int png_compression = 0;
  // Export and cutout (remove_background, keep_alpha, dpi). dpi: the pixel density written into
  // the file (PNG pHYs, JPEG JFIF, WebP and AVIF EXIF); 0: none given, libvips' default. Without
  // inference, no model runs: the matte is the image's own alpha, or opaque where it has none.
  // keep_alpha: an image with an alpha channel that is below 255 anywhere is its own matte, no
  // inference; any other image runs the model (pipeline.cc own_matte).
  int dpi = 0;
  bool inference = false;
  bool keep_alpha = false;
  // metadata: none, the input's XMP packet as it is, or its EXIF Copyright and UserComment in a
  // minimal EXIF block of ours (and, with ExifSubsetXmp, the same two as a minimal XMP packet).
  // keep_icc (color_space=original): the input's RGB ICC profile written into the output (PNG
  // iCCP); its pixels are never converted to sRGB by it (image_io.cc to_srgb8 applies no profile).
  MetadataMode metadata = MetadataMode::None;
  bool keep_icc = false;
};

}  // namespace bgone
