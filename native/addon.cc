// N-API surface of the native core. TypeScript validates and normalises options and owns every
// default (src/lib/options.ts, src/lib/models.ts); this file copies each field strictly into
// JobOptions / ModelSpec (fields.h: a missing or mistyped field is a TypeError, never a default),
// runs the job on a job thread of the core's own (job_threads.h) and turns the result or a
// PipelineError back into JavaScript values.
#include <fcntl.h>
#include <napi.h>
#include <sys/resource.h>
#include <vips/vips.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "buffers.h"
#include "errors.h"
#include "fields.h"
#include "image_io.h"
#include "job_threads.h"
#include "jobs.h"
#include "model.h"
#include "model_resample.h"
#include "ort.h"
#include "pipeline.h"
#include "png_writer.h"
#include "providers.h"
#include "run_deadline.h"

namespace bgone {
namespace {

using ModelRef = std::shared_ptr<Model>;

Napi::Error make_error(Napi::Env env, ErrorCode code, const std::string& detail) {
  Napi::Error error = Napi::Error::New(env, detail);
  error.Value().Set("code", error_code_name(code));
  return error;
}

// Encoded bytes become a Buffer's memory without a copy; the Buffer frees them with the allocator
// they came from. `encoded` no longer owns them.
Napi::Buffer<uint8_t> take_encoded(Napi::Env env, Encoded& encoded) {
  void* data = encoded.data;
  const bool own = encoded.own;
  encoded.data = nullptr;
  return Napi::Buffer<uint8_t>::New(env, static_cast<uint8_t*>(data), encoded.length,
                                    [own](Napi::Env, uint8_t* p) { free_encoded(p, own); });
}

// Bounds below are what the C++ code needs to stay safe (no division by zero, values that fit their
// types and libvips' ranges), not the user-facing limits: those are checked in TypeScript first.
JobOptions read_options(const Napi::Value& value) {
  FieldReader o(value, "options");
  JobOptions j;
  j.format = o.choice<OutputFormat>("format", {{"png", OutputFormat::Png},
                                               {"jpg", OutputFormat::Jpeg},
                                               {"webp", OutputFormat::Webp},
                                               {"auto", OutputFormat::Auto},
                                               {"avif", OutputFormat::Avif}});
  j.alpha_only = o.choice<bool>("channels", {{"rgba", false}, {"alpha", true}});
  j.zip = o.boolean("zip");
  if (j.zip && j.format != OutputFormat::Jpeg) throw ContractError("options.zip needs format jpg");
  const std::vector<double> background = o.nullable_numbers("background", 4, 0, 255, true);
  j.has_background = !background.empty();
  for (size_t i = 0; i < background.size(); ++i) j.background[i] = static_cast<uint8_t>(background[i]);
  j.max_pixels = o.number("maxPixels", 1, 1e12);
  j.crop = o.choice<CropMode>("crop", {{"none", CropMode::None}, {"subject", CropMode::Subject}, {"aspect", CropMode::Aspect}});
  j.aspect_w = static_cast<uint32_t>(o.integer("aspectWidth", 1, 1000000));
  j.aspect_h = static_cast<uint32_t>(o.integer("aspectHeight", 1, 1000000));
  const std::vector<double> share = o.numbers("paddingShare", 4, 0, 1000, false);
  const std::vector<double> px = o.numbers("paddingPx", 4, 0, 1000000, true);
  for (int i = 0; i < 4; ++i) {
    j.padding_share[i] = share[i];
    j.padding_px[i] = px[i];
  }
  j.scale = o.number("scale", 0, 1);
  const std::vector<double> position = o.nullable_numbers("position", 2, 0, 1, false);
  j.has_position = !position.empty();
  for (size_t i = 0; i < position.size(); ++i) j.position[i] = position[i];
  j.canvas_w = static_cast<int>(o.integer("canvasWidth", 0, 100000));
  j.canvas_h = static_cast<int>(o.integer("canvasHeight", 0, 100000));
  if ((j.canvas_w == 0) != (j.canvas_h == 0)) throw ContractError("options.canvasWidth and canvasHeight must be both 0 or both set");
  if (static_cast<double>(j.canvas_w) * j.canvas_h > 16e6) throw ContractError("options.canvasWidth x canvasHeight must be at most 16 MP");
  j.placement = o.choice<PlacementCanvas>("placement", {{"none", PlacementCanvas::None},
                                                        {"canvas", PlacementCanvas::Canvas},
                                                        {"original", PlacementCanvas::Original},
                                                        {"subject", PlacementCanvas::Subject}});
  if (j.placement != PlacementCanvas::None && (j.placement == PlacementCanvas::Canvas) != (j.canvas_w > 0))
    throw ContractError("options.placement canvas needs canvasWidth and canvasHeight, original and subject none");
  const std::vector<double> max_canvas = o.numbers("maxCanvas", 2, 0, 100000, true);
  j.max_canvas_w = static_cast<int>(max_canvas[0]);
  j.max_canvas_h = static_cast<int>(max_canvas[1]);
  const std::vector<double> margin_share = o.numbers("marginShare", 4, 0, 0.49, false);
  const std::vector<double> margin_px = o.numbers("marginPx", 4, 0, 100000, true);
  const std::vector<double> area_share = o.numbers("areaShare", 4, 0, 0.49, false);
  const std::vector<double> area_px = o.numbers("areaPx", 4, 0, 100000, true);
  for (int i = 0; i < 4; ++i) {
    j.margin_share[i] = margin_share[i];
    j.margin_px[i] = margin_px[i];
    j.area_share[i] = area_share[i];
    j.area_px[i] = area_px[i];
  }
  j.cover = o.boolean("cover");
  const int snap = o.choice<int>("snap", {{"none", 0}, {"both", 3}, {"horizontal", 1}, {"vertical", 2}});
  j.snap_x = (snap & 1) != 0;
  j.snap_y = (snap & 2) != 0;
  j.reference_image = o.choice<bool>("referenceBox", {{"subject", false}, {"image", true}});
  const std::vector<double> roi = o.nullable_numbers("roi", 4, 0, 1000000, true);
  j.has_roi = !roi.empty();
  for (size_t i = 0; i < roi.size(); ++i) j.roi[i] = static_cast<int>(roi[i]);
  if (j.has_roi && (j.roi[2] <= j.roi[0] || j.roi[3] <= j.roi[1])) throw ContractError("options.roi must not be empty");
  j.max_side = static_cast<int>(o.integer("maxSide", 1, 1000000));
  j.refine = o.boolean("refine");
  j.min_subject = o.number("minSubject", 0, 1);
  j.guided_radius = static_cast<int>(o.integer("guidedRadius", 0, 1000));
  j.guided_eps = o.number("guidedEps", 0, 1e6);
  j.levels_low = static_cast<float>(o.number("levelsLow", 0, 1));
  j.levels_high = static_cast<float>(o.number("levelsHigh", 0, 1));
  j.inference_size = static_cast<int>(o.integer("inferenceSize", 32, 4096));
  j.mirror_weight = static_cast<float>(o.number("mirrorWeight", 0, 1));
  j.mirror_union = static_cast<float>(o.number("mirrorUnion", 0, 1));
  j.second_side = static_cast<int>(o.integer("secondSide", 0, 4096));
  j.second_weight = static_cast<float>(o.number("secondWeight", 0, 1));
  if ((j.second_side > 0) != (j.second_weight > 0)) throw ContractError("options.secondSide and secondWeight must be set together");
  if (j.second_side > 0 && j.second_side < 32) throw ContractError("options.secondSide must be 0 or at least 32");
  j.shadow = o.choice<ShadowKind>("shadow", {{"none", ShadowKind::None}, {"drop", ShadowKind::Drop}, {"contact", ShadowKind::Contact}});
  j.shadow_opacity = static_cast<float>(o.number("shadowOpacity", 0, 1));
  // Shares of the subject's size: a shadow far off the canvas would only widen its grid.
  j.shadow_offset_x = o.number("shadowOffsetX", -1, 1);
  j.shadow_offset_y = o.number("shadowOffsetY", -1, 1);
  j.shadow_blur = o.number("shadowBlur", 0, 1);
  j.contact_band = o.number("contactBand", 0, 1);
  j.contact_height = o.number("contactHeight", 1e-3, 1);
  j.contact_blur = o.number("contactBlur", 0, 1);
  j.opaque_interior = o.boolean("opaqueInterior");
  j.interior_min = static_cast<float>(o.number("interiorMin", 0, 0.5));
  j.interior_inset = o.number("interiorInset", 0, 0.5);
  j.despill = o.boolean("despill");
  j.despill_band = o.number("despillBand", 0, 1);
  j.despill_key_margin = static_cast<float>(o.number("despillKeyMargin", 0, 1));
  // The outline and the background's effects (outline.h, bg_blur.h).
  const std::vector<double> outline = o.nullable_numbers("outline", 4, 0, 255, true);
  j.outline = !outline.empty();
  for (size_t i = 0; i < outline.size(); ++i) j.outline_color[i] = static_cast<uint8_t>(outline[i]);
  j.outline_width = o.number("outlineWidth", 0, 0.1);
  j.outline_blur = o.number("outlineBlur", 0, 0.025);
  j.bg_blur = o.choice<BgBlur>("bgBlur", {{"none", BgBlur::None}, {"gaussian", BgBlur::Gaussian}, {"bokeh", BgBlur::Bokeh}});
  j.bg_blur_radius = o.number("bgBlurRadius", 0, 0.05);
  if ((j.bg_blur == BgBlur::None) != (j.bg_blur_radius == 0))
    throw ContractError("options.bgBlurRadius must be above 0 with bgBlur gaussian or bokeh, and 0 with none");
  j.bg_contain = o.choice<bool>("bgFit", {{"cover", false}, {"contain", true}});
  if (j.alpha_only && (j.outline || j.bg_blur != BgBlur::None)) throw ContractError("options.outline and bgBlur need channels rgba");
  if (j.bg_blur != BgBlur::None && j.has_background) throw ContractError("options.bgBlur and background are two backgrounds");
  j.quality = static_cast<int>(o.integer("quality", 1, 100));
  j.png_compression = static_cast<int>(o.integer("pngCompression", 0, 9));
  // Export and cutout.
  j.dpi = static_cast<int>(o.integer("dpi", 0, 1200));
  if (j.dpi != 0 && j.dpi < 72) throw ContractError("options.dpi must be 0 or 72 to 1200");
  j.inference = o.boolean("inference");
  j.keep_alpha = o.boolean("keepAlpha");
  if (!j.inference && j.keep_alpha) throw ContractError("options.keepAlpha needs inference");
  j.metadata = o.choice<MetadataMode>("metadata", {{"none", MetadataMode::None},
                                                   {"xmp", MetadataMode::Xmp},
                                                   {"exif_subset", MetadataMode::ExifSubset},
                                                   {"exif_subset_xmp", MetadataMode::ExifSubsetXmp}});
  j.keep_icc = o.choice<bool>("colorSpace", {{"srgb", false}, {"original", true}});
  if (j.keep_icc && (j.format != OutputFormat::Png || j.dpi != 0 || j.keep_alpha || j.metadata == MetadataMode::ExifSubset ||
                     j.metadata == MetadataMode::ExifSubsetXmp))
    throw ContractError("options.colorSpace original needs format png, no dpi, no keepAlpha and no EXIF metadata");
  if (!j.inference && (j.opaque_interior || j.despill || j.mirror_weight > 0 || j.second_side > 0))
    throw ContractError("options.inference false takes no opaqueInterior, despill, mirrorWeight or secondSide");
  o.finish();
  return j;
}

ModelSpec read_model_spec(const Napi::Value& value) {
  FieldReader o(value, "model spec");
  ModelSpec spec;
  spec.path = o.string("path");
  spec.output_index = static_cast<int>(o.integer("outputIndex", 0, 4096));
  spec.matte = static_cast<MatteTransform>(o.integer("matteTransform", 0, 2));
  spec.width = static_cast<int>(o.integer("width", 1, 16384));
  spec.height = static_cast<int>(o.integer("height", 1, 16384));
  const std::vector<double> mean = o.numbers("mean", 3, -1e9, 1e9, false);
  // Divided by: strictly positive.
  const std::vector<double> std_dev = o.numbers("std", 3, 1e-9, 1e9, false);
  for (int c = 0; c < 3; ++c) {
    spec.mean[c] = static_cast<float>(mean[c]);
    spec.std[c] = static_cast<float>(std_dev[c]);
  }
  spec.threads = static_cast<int>(o.integer("threads", 1, 4096));
  spec.dynamic_size = o.boolean("dynamicSize");
  spec.provider = o.choice<const char*>("provider", {{"cpu", "cpu"}, {"cuda", "cuda"}, {"tensorrt", "tensorrt"}, {"webgpu", "webgpu"}});
  spec.device_id = static_cast<int>(o.integer("deviceId", 0, 255));
  spec.gpu_mem_limit_mb = o.integer("gpuMemLimitMb", 0, 1 << 20);
  spec.tensorrt_cache_dir = o.string("tensorrtCacheDir");
  spec.webgpu_cpu_adapter = o.boolean("webgpuCpuAdapter");
  spec.warm_up_runs = static_cast<int>(o.integer("warmUpRuns", 0, 8));
  spec.warm_up_side = static_cast<int>(o.integer("warmUpSide", 1, 16384));
  spec.run_timeout_ms = o.integer("runTimeoutMs", 0, 86'400'000);
  o.finish();
  return spec;
}

// Turns a contract violation into the TypeError JavaScript sees; returns undefined for the caller.
Napi::Value throw_type_error(Napi::Env env, const ContractError& e) {
  Napi::TypeError::New(env, std::string("bgone native contract: ") + e.what()).ThrowAsJavaScriptException();
  return env.Undefined();
}

// A test hook (failNextCall below): the next guarded call throws this kind of C++ exception from
// inside the guard, so a test can prove that every export turns one into a JavaScript error.
enum class InjectedFailure { None, Contract, Pipeline, BadAlloc, Std, Unknown };
InjectedFailure g_fail_next = InjectedFailure::None;

void throw_injected() {
  const InjectedFailure kind = g_fail_next;
  g_fail_next = InjectedFailure::None;
  switch (kind) {
    case InjectedFailure::None:
      return;
    case InjectedFailure::Contract:
      throw ContractError("injected");
    case InjectedFailure::Pipeline:
      throw PipelineError(ErrorCode::InvalidImage, "injected");
    case InjectedFailure::BadAlloc:
      throw std::bad_alloc();
    case InjectedFailure::Std:
      throw std::runtime_error("injected");
    case InjectedFailure::Unknown:
      throw 42;
  }
}

// Every export runs inside this guard. node-addon-api is built without C++ exceptions
// (CMakeLists.txt), so a C++ exception reaching N-API would abort the process: here a
// ContractError becomes a TypeError, a PipelineError an Error with its code, anything else an
// internal_error, and the export returns undefined with the JavaScript exception pending.
template <Napi::Value (*Export)(const Napi::CallbackInfo&)>
Napi::Value guarded(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  try {
    throw_injected();
    return Export(info);
  } catch (const ContractError& e) {
    return throw_type_error(env, e);
  } catch (const PipelineError& e) {
    make_error(env, e.code(), e.what()).ThrowAsJavaScriptException();
  } catch (const std::bad_alloc&) {
    make_error(env, ErrorCode::Internal, "out of memory").ThrowAsJavaScriptException();
  } catch (const std::exception& e) {
    make_error(env, ErrorCode::Internal, e.what()).ThrowAsJavaScriptException();
  } catch (...) {
    make_error(env, ErrorCode::Internal, "unknown native exception").ThrowAsJavaScriptException();
  }
  return env.Undefined();
}

class LoadModelCall : public NativeCall {
 public:
  LoadModelCall(Napi::Env env, ModelSpec spec) : NativeCall(env), spec_(std::move(spec)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    try {
      model_ = std::make_shared<Model>(spec_);
      model_->warm_up();
    } catch (const ProviderError& e) {
      provider_failed_ = true;
      SetError(e.what());
    } catch (const PipelineError& e) {
      code_ = e.code();
      SetError(e.what());
    }
  }
  void OnOK(Napi::Env env) override {
    auto* holder = new ModelRef(model_);
    deferred_.Resolve(Napi::External<ModelRef>::New(env, holder, [](Napi::Env, ModelRef* ref) { delete ref; }));
  }
  void OnError(Napi::Env env, const std::string& message) override {
    Napi::Error rejection = make_error(env, code_, message);
    // The session could not get its execution provider: src/lib/models.ts says so in its message.
    if (provider_failed_) rejection.Value().Set("reason", "execution_provider");
    deferred_.Reject(rejection.Value());
  }

 private:
  ModelSpec spec_;
  ModelRef model_;
  bool provider_failed_ = false;
  ErrorCode code_ = ErrorCode::Internal;
  Napi::Promise::Deferred deferred_;
};

class RemoveBackgroundCall : public NativeCall {
 public:
  RemoveBackgroundCall(Napi::Env env, Napi::Buffer<uint8_t> input, JobOptions options, ModelRef model, Napi::Value background)
      : NativeCall(env),
        input_ref_(Napi::Persistent(input.As<Napi::Object>())),
        data_(input.Data()),
        length_(input.Length()),
        options_(options),
        model_(std::move(model)),
        deferred_(Napi::Promise::Deferred::New(env)) {
    // The background image's bytes are read in place too, kept alive the same way.
    if (background.IsBuffer()) {
      Napi::Buffer<uint8_t> bytes = background.As<Napi::Buffer<uint8_t>>();
      background_ref_ = Napi::Persistent(bytes.As<Napi::Object>());
      background_ = bytes.Data();
      background_length_ = bytes.Length();
    }
  }
  ~RemoveBackgroundCall() override {
    if (result_.encoded.data != nullptr) free_encoded(result_.encoded.data, result_.encoded.own);
    if (result_.alpha.data != nullptr) free_encoded(result_.alpha.data, result_.alpha.own);
  }
  Napi::Promise promise() { return deferred_.Promise(); }

 protected:
  // Runs on a job thread: no JavaScript values may be touched here. The input bytes are
  // read in place, never copied: input_ref_ keeps the Buffer alive, but not its memory if its
  // ArrayBuffer is transferred, so JavaScript hands over only bytes that nothing can transfer
  // (src/lib/prepare-job.ts copies a caller's).
  void Execute() override {
    // Memory freed by the job stays warm for the next one, and goes back once the core is idle.
    const JobInProgress in_progress;
    try {
      result_ = run_job(data_, length_, options_, model_.get(), background_, background_length_);
    } catch (const PipelineError& e) {
      code_ = e.code();
      from_background_ = e.background();
      SetError(e.what());
    }
  }

  void OnOK(Napi::Env env) override {
    Napi::Object out = Napi::Object::New(env);
    out.Set("data", take_encoded(env, result_.encoded));
    if (result_.alpha.data != nullptr) {
      out.Set("alpha", take_encoded(env, result_.alpha));
    } else {
      out.Set("alpha", env.Null());
    }
    out.Set("width", result_.width);
    out.Set("height", result_.height);
    out.Set("channels", result_.channels);
    out.Set("format", result_.format == OutputFormat::Jpeg   ? "jpg"
                      : result_.format == OutputFormat::Webp ? "webp"
                      : result_.format == OutputFormat::Avif ? "avif"
                                                             : "png");
    Napi::Object foreground = Napi::Object::New(env);
    foreground.Set("top", result_.foreground.top);
    foreground.Set("left", result_.foreground.left);
    foreground.Set("width", result_.foreground.width);
    foreground.Set("height", result_.foreground.height);
    out.Set("foreground", foreground);
    out.Set("uncertainty", result_.uncertainty);
    const Timings& t = result_.timings;
    Napi::Object timings = Napi::Object::New(env);
    timings.Set("decode", t.decode);
    timings.Set("preprocess", t.preprocess);
    timings.Set("queue", t.queue);
    timings.Set("inference", t.inference);
    timings.Set("inferenceCpu", t.inference_cpu);
    timings.Set("resize", t.resize);
    timings.Set("matting", t.matting);
    timings.Set("encode", t.encode);
    timings.Set("effects", t.effects);
    timings.Set("total", t.total);
    out.Set("timings", timings);
    deferred_.Resolve(out);
  }
  void OnError(Napi::Env env, const std::string& message) override {
    Napi::Error rejection = make_error(env, code_, message);
    if (from_background_) rejection.Value().Set("input", "background");
    deferred_.Reject(rejection.Value());
  }
  void Abandon() override {
    input_ref_.SuppressDestruct();
    background_ref_.SuppressDestruct();
  }

 private:
  Napi::ObjectReference input_ref_;
  const uint8_t* data_;
  size_t length_;
  Napi::ObjectReference background_ref_;
  const uint8_t* background_ = nullptr;
  size_t background_length_ = 0;
  bool from_background_ = false;
  JobOptions options_;
  ModelRef model_;
  JobResult result_;
  ErrorCode code_ = ErrorCode::Internal;
  Napi::Promise::Deferred deferred_;
};

// init({ onnxruntime: path }) -> { vips: version }
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  FieldReader o(info[0], "init options");
  const std::string onnxruntime = o.string("onnxruntime");
  o.finish();
  init_vips();
  load_onnxruntime(onnxruntime);
  Napi::Object versions = Napi::Object::New(env);
  versions.Set("vips", vips_version_string());
  return versions;
}

// availableProviders() -> string[]: the execution providers the loaded ONNX Runtime was built with.
// Synchronous: a list read from the runtime, after init.
Napi::Value AvailableProviders(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::vector<std::string> names = available_providers();
  Napi::Array out = Napi::Array::New(env, names.size());
  for (size_t i = 0; i < names.size(); ++i) out.Set(static_cast<uint32_t>(i), names[i]);
  return out;
}

// webgpuDevice() -> string | null: the Vulkan device the WebGPU provider runs on (providers.h), null
// without one. Synchronous: the loader is asked once per process.
Napi::Value WebgpuDevice(const Napi::CallbackInfo& info) {
  const std::string name = webgpu_device();
  return name.empty() ? info.Env().Null() : Napi::String::New(info.Env(), name);
}

// loadModel({ path, outputIndex, matteTransform, width, height, mean, std, dynamicSize, threads, provider,
// deviceId, gpuMemLimitMb, warmUpRuns, warmUpSide }) -> Promise<handle>
Napi::Value LoadModel(const Napi::CallbackInfo& info) {
  const ModelSpec spec = read_model_spec(info[0]);
  auto* call = new LoadModelCall(info.Env(), spec);
  Napi::Promise promise = call->promise();
  call->Queue();
  return promise;
}

// The model handle's session, or null after releaseModel (a TypeError for anything else).
ModelRef* model_holder(const Napi::CallbackInfo& info, const char* usage) {
  if (!info[0].IsExternal()) throw ContractError(usage);
  return info[0].As<Napi::External<ModelRef>>().Data();
}

// releaseModel(handle): the handle lets go of its session; jobs running on it keep it until they
// end, and the session's memory goes back with the last of them.
Napi::Value ReleaseModel(const Napi::CallbackInfo& info) {
  model_holder(info, "releaseModel(handle)")->reset();
  return info.Env().Undefined();
}

// modelMemory(handle) -> bytes the session holds for as long as it lives (its weights, packed for
// the kernels, on the CPU); 0 after releaseModel.
Napi::Value ModelMemory(const Napi::CallbackInfo& info) {
  const ModelRef& model = *model_holder(info, "modelMemory(handle)");
  return Napi::Number::New(info.Env(), model ? static_cast<double>(model->resident_bytes()) : 0.0);
}

// removeBackground(buffer, options, modelHandle, background) -> Promise<{ data, alpha, width, height, channels,
// format, foreground, uncertainty, timings }>; background: the encoded bytes of a background image, or null;
// modelHandle: null for a job without inference (options.inference false), which runs no model.
Napi::Value RemoveBackground(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsBuffer() || !info[1].IsObject() || !(info[2].IsExternal() || info[2].IsNull()) ||
      !(info[3].IsBuffer() || info[3].IsNull())) {
    Napi::TypeError::New(env, "removeBackground(buffer, options, model, background)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const JobOptions options = read_options(info[1]);
  // A job without inference runs no model: its handle is null (and only then).
  if (info[2].IsNull() != !options.inference)
    throw ContractError("removeBackground: the model is null exactly when options.inference is false");
  ModelRef model = info[2].IsNull() ? ModelRef() : *info[2].As<Napi::External<ModelRef>>().Data();
  if (options.inference && !model) {
    Napi::TypeError::New(env, "removeBackground: the model was released").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto* call = new RemoveBackgroundCall(env, info[0].As<Napi::Buffer<uint8_t>>(), options, model, info[3]);
  Napi::Promise promise = call->promise();
  call->Queue();
  return promise;
}

// probe(buffer, maxSide) -> { format, width, height }: the sniff and the header check of a job,
// without decoding a pixel. Synchronous: it reads a header only, which is cheap enough for the
// JavaScript thread, where the batch endpoint checks each upload as it arrives.
Napi::Value Probe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsBuffer() || !info[1].IsNumber()) {
    Napi::TypeError::New(env, "probe(buffer, maxSide)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Buffer<uint8_t> input = info[0].As<Napi::Buffer<uint8_t>>();
  const int max_side = info[1].As<Napi::Number>().Int32Value();
  const InputFormat format = sniff_format(input.Data(), input.Length());
  const HeaderInfo header = read_header(input.Data(), input.Length(), format, max_side);
  Napi::Object out = Napi::Object::New(env);
  out.Set("format", format == InputFormat::Jpeg ? "jpg" : format == InputFormat::Png ? "png" : "webp");
  out.Set("width", header.width);
  out.Set("height", header.height);
  return out;
}

// memoryStats() -> { inUse, cached, peak }: bytes of the large blocks of buffers.h (in use by jobs,
// kept warm for the next job, the most in use at once since the cache was last given back).
Napi::Value MemoryStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const BufferStats stats = buffer_stats();
  Napi::Object out = Napi::Object::New(env);
  out.Set("inUse", static_cast<double>(stats.in_use));
  out.Set("cached", static_cast<double>(stats.cached));
  out.Set("peak", static_cast<double>(stats.peak));
  out.Set("mapped", static_cast<double>(stats.mapped));
  out.Set("lasting", static_cast<double>(stats.lasting));
  out.Set("inferenceStages", static_cast<double>(inference_stages()));
  return out;
}

// modelMatte(handle, rgb, width, height) -> Float32Array: the model's matte (its output through the
// spec's transform, before any clamp) for width x height RGB pixels taken as the model's input as
// they are (normalised as a job's are), so that `bgone models add` can judge what a graph answers.
// Synchronous: for the proving run's process, which does nothing else. Fails as a job's run fails
// (a matte that is not finite everywhere, a run past its limit).
Napi::Value ModelMatte(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsExternal() || !info[1].IsBuffer() || !info[2].IsNumber() || !info[3].IsNumber())
    throw ContractError("modelMatte(handle, rgb, width, height)");
  ModelRef model = *info[0].As<Napi::External<ModelRef>>().Data();
  if (!model) throw ContractError("modelMatte: the model was released");
  Napi::Buffer<uint8_t> rgb = info[1].As<Napi::Buffer<uint8_t>>();
  const int width = info[2].As<Napi::Number>().Int32Value(), height = info[3].As<Napi::Number>().Int32Value();
  if (width < 1 || height < 1 || width > 16384 || height > 16384 || static_cast<size_t>(width) * height * 3 != rgb.Length())
    throw ContractError("modelMatte: rgb must hold width x height x 3 bytes, sides 1 to 16384");
  Pixels pixels;
  pixels.width = width;
  pixels.height = height;
  pixels.bands = 3;
  pixels.data.assign(rgb.Data(), rgb.Data() + rgb.Length());
  Plane matte;
  InferOptions how;
  how.clamp = false;
  model->infer(pixels, width, height, matte, how);
  Napi::Float32Array out = Napi::Float32Array::New(env, matte.v.size());
  std::copy(matte.v.begin(), matte.v.end(), out.Data());
  return out;
}

// limitMemory(bytes): the most private writable memory (RLIMIT_DATA) the process may map from now
// on; past it an allocation fails instead of the machine running out. For the proving process of
// `bgone models add`, which runs a graph nobody has vouched for.
Napi::Value LimitMemory(const Napi::CallbackInfo& info) {
  if (!info[0].IsNumber()) throw ContractError("limitMemory(bytes)");
  const double bytes = info[0].As<Napi::Number>().DoubleValue();
  if (!(bytes >= 1) || bytes > 9.0e18) throw ContractError("limitMemory: bytes must be a positive number");
  rlimit limit{};
  limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(bytes);
  if (setrlimit(RLIMIT_DATA, &limit) != 0) throw PipelineError(ErrorCode::Internal, std::string("setrlimit: ") + std::strerror(errno));
  return info.Env().Undefined();
}

// stopRuns() -> number: tells every model run in progress to stop, and every later one as it starts
// (each fails its job); returns how many were in progress. For a process that is ending.
Napi::Value StopRuns(const Napi::CallbackInfo& info) {
  stop_all_runs();
  return Napi::Number::New(info.Env(), runs_in_progress());
}

// runsInProgress() -> number: model runs in progress now.
Napi::Value RunsInProgress(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), runs_in_progress()); }

// encodePng(pixels, width, height, bands, level) -> Buffer: the PNG writer alone, on given pixels
// (width x height x bands bytes, rows in order), so that tests reach its encoders' edge cases
// (stored blocks, long runs, every band count) directly. Not part of the library's API.
Napi::Value EncodePng(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const bool numbers = info[1].IsNumber() && info[2].IsNumber() && info[3].IsNumber() && info[4].IsNumber();
  if (!info[0].IsBuffer() || !numbers) {
    Napi::TypeError::New(env, "encodePng(pixels, width, height, bands, level)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Buffer<uint8_t> pixels = info[0].As<Napi::Buffer<uint8_t>>();
  const int width = info[1].As<Napi::Number>().Int32Value(), height = info[2].As<Napi::Number>().Int32Value();
  const int bands = info[3].As<Napi::Number>().Int32Value(), level = info[4].As<Napi::Number>().Int32Value();
  const size_t stride = static_cast<size_t>(std::max(width, 0)) * std::max(bands, 0);
  if (width < 1 || height < 1 || level < 0 || level > 9 || stride * height != pixels.Length() || !png_writer_available()) {
    Napi::RangeError::New(env, "encodePng: pixels, sizes or level do not fit").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const uint8_t* data = pixels.Data();
  Encoded encoded =
      encode_png_rows(width, height, bands, level, 0, [&](int y, uint8_t* row) { std::memcpy(row, data + y * stride, stride); });
  return take_encoded(env, encoded);
}

Napi::Value ResampleForModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  bool numbers = true;
  for (int i = 1; i <= 5; ++i) numbers = numbers && info[i].IsNumber();
  if (!info[0].IsBuffer() || !numbers) {
    Napi::TypeError::New(env, "resampleForModel(pixels, width, height, bands, outWidth, outHeight)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Buffer<uint8_t> pixels = info[0].As<Napi::Buffer<uint8_t>>();
  int v[5];
  for (int i = 0; i < 5; ++i) v[i] = info[i + 1].As<Napi::Number>().Int32Value();
  const int width = v[0], height = v[1], bands = v[2], out_w = v[3], out_h = v[4];
  const bool sizes = width >= 1 && height >= 1 && out_w >= 1 && out_h >= 1 && out_w <= 8192 && out_h <= 8192;
  if (!sizes || (bands != 3 && bands != 4) || static_cast<size_t>(width) * height * bands != pixels.Length()) {
    Napi::RangeError::New(env, "resampleForModel: pixels or sizes do not fit").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const Pixels out = resample_for_model(pixels.Data(), width, height, bands, out_w, out_h);
  return Napi::Buffer<uint8_t>::Copy(env, out.data.data(), out.data.size());
}

// An advisory write lock on bytes of an open file (the SQLite owner lock, src/store/sqlite/owner-lock.ts).
// Linux's open file description locks (F_OFD_*): held by the descriptor rather than the process, so
// SQLite closing its own descriptors of the same file never drops one, and a second descriptor in the
// same process is refused like another process. Elsewhere, POSIX record locks (F_SETLK), which lack
// both properties.
#ifdef F_OFD_SETLK
constexpr int kSetLock = F_OFD_SETLK, kGetLock = F_OFD_GETLK;
#else
constexpr int kSetLock = F_SETLK, kGetLock = F_GETLK;
#endif

bool read_lock_range(const Napi::CallbackInfo& info, int& fd, struct flock& range) {
  if (!info[0].IsNumber() || !info[1].IsNumber() || !info[2].IsNumber()) return false;
  fd = info[0].As<Napi::Number>().Int32Value();
  std::memset(&range, 0, sizeof range);
  range.l_whence = SEEK_SET;
  range.l_start = static_cast<off_t>(info[1].As<Napi::Number>().Int64Value());
  range.l_len = static_cast<off_t>(info[2].As<Napi::Number>().Int64Value());
  return fd >= 0 && range.l_start >= 0 && range.l_len >= 1;
}

// lockBytes(fd, start, length, take) -> boolean: takes (take true) or gives back a write lock on the
// bytes; false when another descriptor holds one of them. Throws on any other failure.
Napi::Value LockBytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  struct flock range;
  if (!read_lock_range(info, fd, range) || !info[3].IsBoolean()) {
    Napi::TypeError::New(env, "lockBytes(fd, start, length, take)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  range.l_type = info[3].As<Napi::Boolean>().Value() ? F_WRLCK : F_UNLCK;
  if (fcntl(fd, kSetLock, &range) == 0) return Napi::Boolean::New(env, true);
  if (errno == EAGAIN || errno == EACCES) return Napi::Boolean::New(env, false);
  Napi::Error::New(env, std::string("fcntl lock: ") + std::strerror(errno)).ThrowAsJavaScriptException();
  return env.Undefined();
}

// lockedByte(fd, start, length) -> number | null: the first byte of a lock another descriptor holds
// on the bytes, null when none.
Napi::Value LockedByte(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  struct flock range;
  if (!read_lock_range(info, fd, range)) {
    Napi::TypeError::New(env, "lockedByte(fd, start, length)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  range.l_type = F_WRLCK;
  if (fcntl(fd, kGetLock, &range) != 0) {
    Napi::Error::New(env, std::string("fcntl lock: ") + std::strerror(errno)).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (range.l_type == F_UNLCK) return env.Null();
  return Napi::Number::New(env, static_cast<double>(range.l_start));
}

// failNextCall(kind): the next call of any export throws a C++ exception of that kind inside its
// guard ('contract', 'pipeline', 'bad_alloc', 'std', 'unknown'). For tests; not part of the
// library's API.
Napi::Value FailNextCall(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string kind = info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  const std::pair<const char*, InjectedFailure> kinds[] = {{"contract", InjectedFailure::Contract},
                                                           {"pipeline", InjectedFailure::Pipeline},
                                                           {"bad_alloc", InjectedFailure::BadAlloc},
                                                           {"std", InjectedFailure::Std},
                                                           {"unknown", InjectedFailure::Unknown}};
  for (const auto& [name, failure] : kinds) {
    if (kind == name) {
      g_fail_next = failure;
      return env.Undefined();
    }
  }
  Napi::TypeError::New(env, "failNextCall(kind): contract, pipeline, bad_alloc, std or unknown").ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Object Register(Napi::Env env, Napi::Object exports) {
  exports.Set("init", Napi::Function::New(env, guarded<Init>));
  exports.Set("loadModel", Napi::Function::New(env, guarded<LoadModel>));
  exports.Set("removeBackground", Napi::Function::New(env, guarded<RemoveBackground>));
  exports.Set("releaseModel", Napi::Function::New(env, guarded<ReleaseModel>));
  exports.Set("modelMemory", Napi::Function::New(env, guarded<ModelMemory>));
  exports.Set("availableProviders", Napi::Function::New(env, guarded<AvailableProviders>));
  exports.Set("webgpuDevice", Napi::Function::New(env, guarded<WebgpuDevice>));
  exports.Set("probe", Napi::Function::New(env, guarded<Probe>));
  exports.Set("memoryStats", Napi::Function::New(env, guarded<MemoryStats>));
  exports.Set("modelMatte", Napi::Function::New(env, guarded<ModelMatte>));
  exports.Set("limitMemory", Napi::Function::New(env, guarded<LimitMemory>));
  exports.Set("stopRuns", Napi::Function::New(env, guarded<StopRuns>));
  exports.Set("runsInProgress", Napi::Function::New(env, guarded<RunsInProgress>));
  exports.Set("encodePng", Napi::Function::New(env, guarded<EncodePng>));
  exports.Set("resampleForModel", Napi::Function::New(env, guarded<ResampleForModel>));
  exports.Set("lockBytes", Napi::Function::New(env, guarded<LockBytes>));
  exports.Set("lockedByte", Napi::Function::New(env, guarded<LockedByte>));
  exports.Set("failNextCall", Napi::Function::New(env, FailNextCall));
  return exports;
}

}  // namespace
}  // namespace bgone

static Napi::Object RegisterModule(Napi::Env env, Napi::Object exports) { return bgone::Register(env, exports); }
NODE_API_MODULE(bgone, RegisterModule)
