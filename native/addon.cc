// N-API surface of the native core. JavaScript validates and normalises options (src/options.ts);
// this file only copies them into JobOptions, runs the job on a libuv worker thread and turns the
// result or a PipelineError back into JavaScript values.
#include <napi.h>
#include <vips/vips.h>

#include <memory>
#include <string>

#include "errors.h"
#include "image_io.h"
#include "model.h"
#include "pipeline.h"

namespace bgone {
namespace {

using ModelRef = std::shared_ptr<Model>;

Napi::Error make_error(Napi::Env env, ErrorCode code, const std::string& detail) {
  Napi::Error error = Napi::Error::New(env, detail);
  error.Value().Set("code", error_code_name(code));
  return error;
}

int get_int(const Napi::Object& o, const char* key, int fallback) {
  Napi::Value v = o.Get(key);
  return v.IsNumber() ? v.As<Napi::Number>().Int32Value() : fallback;
}
double get_double(const Napi::Object& o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : fallback;
}
bool get_bool(const Napi::Object& o, const char* key, bool fallback) {
  Napi::Value v = o.Get(key);
  return v.IsBoolean() ? v.As<Napi::Boolean>().Value() : fallback;
}
std::string get_string(const Napi::Object& o, const char* key, const std::string& fallback) {
  Napi::Value v = o.Get(key);
  return v.IsString() ? v.As<Napi::String>().Utf8Value() : fallback;
}

JobOptions read_options(const Napi::Object& o) {
  JobOptions j;
  const std::string format = get_string(o, "format", "png");
  j.format = format == "jpg" ? OutputFormat::Jpeg : format == "webp" ? OutputFormat::Webp : OutputFormat::Png;
  j.alpha_only = get_string(o, "channels", "rgba") == "alpha";
  Napi::Value bg = o.Get("background");
  if (bg.IsArray()) {
    Napi::Array a = bg.As<Napi::Array>();
    j.has_background = true;
    for (uint32_t i = 0; i < 4 && i < a.Length(); ++i) j.background[i] = static_cast<uint8_t>(a.Get(i).As<Napi::Number>().Uint32Value());
  }
  j.max_pixels = get_double(o, "maxPixels", j.max_pixels);
  const std::string crop = get_string(o, "crop", "none");
  j.crop = crop == "subject" ? CropMode::Subject : crop == "aspect" ? CropMode::Aspect : CropMode::None;
  j.aspect_w = static_cast<uint32_t>(get_int(o, "aspectWidth", 1));
  j.aspect_h = static_cast<uint32_t>(get_int(o, "aspectHeight", 1));
  j.padding = get_double(o, "padding", j.padding);
  j.max_side = get_int(o, "maxSide", j.max_side);
  j.refine = get_bool(o, "refine", j.refine);
  j.min_subject = get_double(o, "minSubject", j.min_subject);
  j.guided_radius = get_int(o, "guidedRadius", j.guided_radius);
  j.guided_eps = get_double(o, "guidedEps", j.guided_eps);
  j.levels_low = static_cast<float>(get_double(o, "levelsLow", j.levels_low));
  j.levels_high = static_cast<float>(get_double(o, "levelsHigh", j.levels_high));
  j.quality = get_int(o, "quality", j.quality);
  j.png_compression = get_int(o, "pngCompression", j.png_compression);
  return j;
}

class LoadModelWorker : public Napi::AsyncWorker {
 public:
  LoadModelWorker(Napi::Env env, ModelSpec spec) : Napi::AsyncWorker(env), spec_(std::move(spec)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      model_ = std::make_shared<Model>(spec_);
    } catch (const PipelineError& e) {
      code_ = e.code();
      SetError(e.what());
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    auto* holder = new ModelRef(model_);
    deferred_.Resolve(Napi::External<ModelRef>::New(Env(), holder, [](Napi::Env, ModelRef* ref) { delete ref; }));
  }
  void OnError(const Napi::Error& error) override {
    deferred_.Reject(make_error(Env(), code_, error.Message()).Value());
  }

 private:
  ModelSpec spec_;
  ModelRef model_;
  ErrorCode code_ = ErrorCode::Internal;
  Napi::Promise::Deferred deferred_;
};

class RemoveBackgroundWorker : public Napi::AsyncWorker {
 public:
  RemoveBackgroundWorker(Napi::Env env, Napi::Buffer<uint8_t> input, JobOptions options, ModelRef model)
      : Napi::AsyncWorker(env),
        input_ref_(Napi::Persistent(input.As<Napi::Object>())),
        data_(input.Data()),
        length_(input.Length()),
        options_(options),
        model_(std::move(model)),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  ~RemoveBackgroundWorker() override {
    if (result_.encoded.data != nullptr) free_encoded(result_.encoded.data);
  }
  Napi::Promise promise() { return deferred_.Promise(); }

  // Runs on a libuv worker thread: no JavaScript values may be touched here. The input bytes are
  // read in place (the Buffer is kept alive by input_ref_), never copied.
  void Execute() override {
    try {
      result_ = run_job(data_, length_, options_, *model_);
    } catch (const PipelineError& e) {
      code_ = e.code();
      SetError(e.what());
    } catch (const std::bad_alloc&) {
      code_ = ErrorCode::Internal;
      SetError("out of memory");
    } catch (const std::exception& e) {
      code_ = ErrorCode::Internal;
      SetError(e.what());
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object out = Napi::Object::New(env);
    // The encoded bytes become the Buffer's memory without a copy; libvips allocated them.
    void* data = result_.encoded.data;
    result_.encoded.data = nullptr;
    out.Set("data", Napi::Buffer<uint8_t>::New(env, static_cast<uint8_t*>(data), result_.encoded.length,
                                               [](Napi::Env, uint8_t* p) { free_encoded(p); }));
    out.Set("width", result_.width);
    out.Set("height", result_.height);
    out.Set("channels", result_.channels);
    const Timings& t = result_.timings;
    Napi::Object timings = Napi::Object::New(env);
    timings.Set("decode", t.decode);
    timings.Set("preprocess", t.preprocess);
    timings.Set("queue", t.queue);
    timings.Set("inference", t.inference);
    timings.Set("resize", t.resize);
    timings.Set("matting", t.matting);
    timings.Set("encode", t.encode);
    timings.Set("total", t.total);
    out.Set("timings", timings);
    deferred_.Resolve(out);
  }
  void OnError(const Napi::Error& error) override { deferred_.Reject(make_error(Env(), code_, error.Message()).Value()); }

 private:
  Napi::ObjectReference input_ref_;
  const uint8_t* data_;
  size_t length_;
  JobOptions options_;
  ModelRef model_;
  JobResult result_;
  ErrorCode code_ = ErrorCode::Internal;
  Napi::Promise::Deferred deferred_;
};

// init({ onnxruntime: path, vipsConcurrency? })
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = info[0].As<Napi::Object>();
  try {
    init_vips();
    const int concurrency = get_int(o, "vipsConcurrency", 0);
    if (concurrency > 0) vips_concurrency_set(concurrency);
    load_onnxruntime(get_string(o, "onnxruntime", ""));
  } catch (const PipelineError& e) {
    make_error(env, e.code(), e.what()).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Object versions = Napi::Object::New(env);
  versions.Set("vips", vips_version_string());
  return versions;
}

// loadModel({ path, inputName, outputName, width, height, mean, std, threads }) -> Promise<handle>
Napi::Value LoadModel(const Napi::CallbackInfo& info) {
  Napi::Object o = info[0].As<Napi::Object>();
  ModelSpec spec;
  spec.path = get_string(o, "path", "");
  spec.input_name = get_string(o, "inputName", "input");
  spec.output_name = get_string(o, "outputName", "output");
  spec.width = get_int(o, "width", 1024);
  spec.height = get_int(o, "height", 1024);
  spec.threads = get_int(o, "threads", 0);
  Napi::Array mean = o.Get("mean").As<Napi::Array>();
  Napi::Array std_dev = o.Get("std").As<Napi::Array>();
  for (uint32_t c = 0; c < 3; ++c) {
    spec.mean[c] = mean.Get(c).As<Napi::Number>().FloatValue();
    spec.std[c] = std_dev.Get(c).As<Napi::Number>().FloatValue();
  }
  auto* worker = new LoadModelWorker(info.Env(), spec);
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

// removeBackground(buffer, options, modelHandle) -> Promise<{ data, width, height, channels, timings }>
Napi::Value RemoveBackground(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsBuffer() || !info[1].IsObject() || !info[2].IsExternal()) {
    Napi::TypeError::New(env, "removeBackground(buffer, options, model)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  ModelRef model = *info[2].As<Napi::External<ModelRef>>().Data();
  auto* worker = new RemoveBackgroundWorker(env, info[0].As<Napi::Buffer<uint8_t>>(), read_options(info[1].As<Napi::Object>()), model);
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

Napi::Object Register(Napi::Env env, Napi::Object exports) {
  exports.Set("init", Napi::Function::New(env, Init));
  exports.Set("loadModel", Napi::Function::New(env, LoadModel));
  exports.Set("removeBackground", Napi::Function::New(env, RemoveBackground));
  return exports;
}

}  // namespace
}  // namespace bgone

static Napi::Object RegisterModule(Napi::Env env, Napi::Object exports) { return bgone::Register(env, exports); }
NODE_API_MODULE(bgone, RegisterModule)
