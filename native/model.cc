#include "model.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>

#include "buffers.h"
#include "errors.h"
#include "jobs.h"
#include "onnxruntime_c_api.h"
#include "ort.h"
#include "parallel.h"
#include "providers.h"
#include "run_deadline.h"

namespace bgone {
namespace {

// How the model runs of the process share the cores. A job alone in the native core runs alone,
// on every core. While other jobs are in progress, a second run may start beside the first (on the
// same session, with the same threads): one run's steps leave gaps (a step waits for its slowest
// thread, and some steps are serial) that the other fills: 4 jobs of 2 MP at once take about 10 %
// less CPU (docs/development.md, "Two runs share one session"). Not more than two: each holds its
// own working memory, for no more gaps to fill. On CUDA and TensorRT the second run's copies to and
// from the GPU and its kernel launches fill the first one's gaps the same way. WebGPU runs one at a
// time: its device has one queue, which would run two runs' work in turn anyway, and runs of one
// session from two threads at once are not proven safe on that provider.
constexpr int kRunsBesideOthers = 2;
int runs_beside_others(const std::string& provider) { return provider == "webgpu" ? 1 : kRunsBesideOthers; }

class RunSlots {
 public:
  // Holds a place for as long as it lives.
  class Place {
   public:
    Place(RunSlots& slots, int beside_others) : slots_(slots) { slots_.acquire(beside_others); }
    ~Place() { slots_.release(); }
    Place(const Place&) = delete;
    Place& operator=(const Place&) = delete;

   private:
    RunSlots& slots_;
  };

 private:
  void acquire(int beside_others) {
    std::unique_lock<std::mutex> lock(mutex_);
    freed_.wait(lock, [this, beside_others] { return running_ < (jobs_in_progress() > 1 ? beside_others : 1); });
    ++running_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
    }
    freed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable freed_;
  int running_ = 0;
};
RunSlots g_run_slots;

void check(OrtStatus* status, const char* what) { ort_check(status, what); }

// ONNX Runtime's CPU memory comes from buffers.h: the large blocks of a run (the memory pattern's
// block, the output, the convolutions' scratch) land on huge pages and are reused warm by the next
// run, instead of being faulted in page by page every run (which cost a third of the run's time).
// Registered once with the environment; sessions use it through session.use_env_allocators.
struct BufferOrtAllocator : OrtAllocator {
  OrtMemoryInfo* info = nullptr;
};
BufferOrtAllocator g_allocator;

// Set on the thread that creates a session: what it allocates (the weights, prepacked for the
// kernels) lives as long as the session, so it is never taken from the cached blocks rounded up to
// huge pages one by one. On the CPU it is packed into the session's arena (buffers.h), whose huge
// pages the kernels read at every run; with a GPU the weights' home is the device, and the host's
// copies, freed once uploaded, would stay as holes in an arena: those come from malloc.
struct CreatingSession {
  bool active = false;
  LastingArena* arena = nullptr;
};
thread_local CreatingSession t_creating;

void* lasting_block(size_t size) { return t_creating.arena != nullptr ? t_creating.arena->alloc(size) : alloc_lasting(size); }

void* ORT_API_CALL allocator_alloc(OrtAllocator*, size_t size) noexcept {
  try {
    return t_creating.active ? lasting_block(size) : alloc_buffer(size);
  } catch (...) {
    return nullptr;  // ONNX Runtime turns this into a failed run, not a crash
  }
}
// ONNX Runtime reserves what it keeps for the session's life (initializers) through this one.
void* ORT_API_CALL allocator_reserve(OrtAllocator*, size_t size) noexcept {
  try {
    return lasting_block(size);  // outside a session's creation, from malloc
  } catch (...) {
    return nullptr;
  }
}
void ORT_API_CALL allocator_free(OrtAllocator*, void* p) noexcept { free_buffer(p); }
const OrtMemoryInfo* ORT_API_CALL allocator_info(const OrtAllocator* self) noexcept {
  return static_cast<const BufferOrtAllocator*>(self)->info;
}

void register_allocator() {
  g_allocator.version = ORT_API_VERSION;
  g_allocator.Alloc = allocator_alloc;
  g_allocator.Free = allocator_free;
  g_allocator.Info = allocator_info;
  g_allocator.Reserve = allocator_reserve;
  g_allocator.GetStats = nullptr;
  g_allocator.AllocOnStream = nullptr;
  g_allocator.Shrink = nullptr;
  check(ort_api()->CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &g_allocator.info), "CreateCpuMemoryInfo");
  check(ort_api()->RegisterAllocator(ort_env(), &g_allocator), "RegisterAllocator");
}

}  // namespace

Model::Model(const ModelSpec& spec) : spec_(spec) {
  static std::once_flag registered;
  std::call_once(registered, register_allocator);
  OrtSessionOptions* options = nullptr;
  check(ort_api()->CreateSessionOptions(&options), "CreateSessionOptions");
  try {
    check(ort_api()->SetIntraOpNumThreads(options, spec.threads), "SetIntraOpNumThreads");
    check(ort_api()->SetInterOpNumThreads(options, 1), "SetInterOpNumThreads");
    check(ort_api()->SetSessionGraphOptimizationLevel(options, ORT_ENABLE_ALL), "SetSessionGraphOptimizationLevel");
    // No arena: with the float models the arena and the memory patterns together cost about 1 GB of
    // peak RSS, and an arena keeps its memory for good. Blocks come from our allocator instead
    // (above), which keeps them warm only while jobs run. The memory pattern stays on: it plans one
    // block per run for the intermediate tensors instead of a malloc and free per op (with the int8
    // model, many small quantize/dequantize tensors, turning it off made the run slower).
    check(ort_api()->DisableCpuMemArena(options), "DisableCpuMemArena");
    check(ort_api()->AddSessionConfigEntry(options, "session.use_env_allocators", "1"), "use_env_allocators");
    // Intra-op threads do not spin while they wait: beside a second run or another job's decode and
    // encode, a spinning thread takes the core the other one needs; a run alone is as fast either
    // way.
    check(ort_api()->AddSessionConfigEntry(options, "session.intra_op.allow_spinning", "0"), "allow_spinning");
    append_execution_provider(options, spec);
    t_creating = {true, spec.provider == "cpu" ? &weights_ : nullptr};
    OrtStatus* created = ort_api()->CreateSession(ort_env(), spec.path.c_str(), options, &session_);
    t_creating = {};
    // The WebGPU provider looks for its adapter when the session starts.
    if (created != nullptr && spec.provider == "webgpu") {
      const std::string reason = ort_api()->GetErrorMessage(created);
      if (is_webgpu_failure(reason)) {
        ort_api()->ReleaseStatus(created);
        throw webgpu_unavailable("CreateSession", reason);
      }
    }
    check(created, "CreateSession");
  } catch (...) {
    ort_api()->ReleaseSessionOptions(options);
    throw;
  }
  ort_api()->ReleaseSessionOptions(options);
  try {
    check(ort_api()->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory_info_), "CreateCpuMemoryInfo");
    size_t inputs = 0, outputs = 0;
    check(ort_api()->SessionGetInputCount(session_, &inputs), "SessionGetInputCount");
    check(ort_api()->SessionGetOutputCount(session_, &outputs), "SessionGetOutputCount");
    if (inputs < 1) throw PipelineError(ErrorCode::Internal, "the model has no input");
    if (static_cast<size_t>(spec.output_index) >= outputs)
      throw PipelineError(ErrorCode::Internal, "the model has " + std::to_string(outputs) + " outputs; its matte is output " +
                                                   std::to_string(spec.output_index));
    input_name_ = session_name(true, 0);
    output_name_ = session_name(false, static_cast<size_t>(spec.output_index));
  } catch (...) {
    if (memory_info_ != nullptr) ort_api()->ReleaseMemoryInfo(memory_info_);
    ort_api()->ReleaseSession(session_);
    throw;
  }
}

std::string Model::session_name(bool input, size_t index) {
  OrtAllocator* allocator = nullptr;
  check(ort_api()->GetAllocatorWithDefaultOptions(&allocator), "GetAllocatorWithDefaultOptions");
  char* name = nullptr;
  check(input ? ort_api()->SessionGetInputName(session_, index, allocator, &name)
              : ort_api()->SessionGetOutputName(session_, index, allocator, &name),
        "SessionGetName");
  std::string copy(name);
  allocator->Free(allocator, name);
  return copy;
}

Model::~Model() {
  if (memory_info_ != nullptr) ort_api()->ReleaseMemoryInfo(memory_info_);
  if (session_ != nullptr) ort_api()->ReleaseSession(session_);
}

namespace {

// The model's input as the model reads it: planes, normalised per channel. The arithmetic is that
// of a table of the 256 values per channel (the same float operations, so the same bits), as a
// loop per channel the compiler vectorises, on the free cores (before the run, all of them).
// `mirrored`: each row read from its end.
Buffer<float> input_tensor(const Pixels& rgb, const ModelSpec& spec, int width, int height, bool mirrored) {
  const size_t plane = static_cast<size_t>(width) * height;
  if (rgb.data.size() != plane * 3) throw PipelineError(ErrorCode::Internal, "the model's input pixels have the wrong size");
  Buffer<float> tensor(plane * 3);
  parallel_rows(height, [&](int first, int end) {
    const size_t from = static_cast<size_t>(first) * width, to = static_cast<size_t>(end) * width;
    const uint8_t* src = rgb.data.data();
    for (int c = 0; c < 3; ++c) {
      const float mean = spec.mean[c], sd = spec.std[c];
      float* dst = tensor.data() + c * plane;
      if (!mirrored) {
        for (size_t i = from; i < to; ++i) dst[i] = (static_cast<float>(src[i * 3 + c]) - mean) / sd;
        continue;
      }
      for (size_t row = from; row < to; row += width) {
        const uint8_t* last = src + (row + width - 1) * 3 + c;
        for (int x = 0; x < width; ++x) dst[row + x] = (static_cast<float>(last[-3 * x]) - mean) / sd;
      }
    }
  });
  return tensor;
}

// The matte from the chosen output, in place (Model::infer then clamps it to 0..1).
void to_matte(MatteTransform transform, float* v, size_t n) {
  switch (transform) {
    case MatteTransform::AsIs:
      return;
    case MatteTransform::Sigmoid:
      for (size_t i = 0; i < n; ++i) v[i] = 1.f / (1.f + std::exp(-v[i]));
      return;
    case MatteTransform::MinMax: {
      if (n == 0) return;
      float lo = v[0], hi = v[0];
      for (size_t i = 1; i < n; ++i) {
        lo = std::min(lo, v[i]);
        hi = std::max(hi, v[i]);
      }
      // A flat answer has no subject to stretch out: it stays as it is.
      if (!(hi > lo)) return;
      const float scale = 1.f / (hi - lo);
      for (size_t i = 0; i < n; ++i) v[i] = (v[i] - lo) * scale;
      return;
    }
  }
}

// Values that are NaN or infinite, from their bits (exponent all ones), whatever the compiler assumes of floats.
size_t count_not_finite(const float* v, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], sizeof bits);
    count += (bits & 0x7f800000u) == 0x7f800000u;
  }
  return count;
}

// User plus system CPU time of the whole process (every thread), ms.
double process_cpu_ms() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
}

}  // namespace

Model::RunCost Model::run(Buffer<float> input, int width, int height, Buffer<float>& out, bool mirrored) {
  const int64_t shape[4] = {1, 3, height, width};
  const size_t plane = static_cast<size_t>(width) * height;
  if (input.size() != plane * 3) throw PipelineError(ErrorCode::Internal, "model input has the wrong size");
  OrtValue* input_value = nullptr;
  check(ort_api()->CreateTensorWithDataAsOrtValue(memory_info_, input.data(), input.size() * sizeof(float), shape, 4,
                                                  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &input_value),
        "CreateTensor");
  const char* input_names[] = {input_name_.c_str()};
  const char* output_names[] = {output_name_.c_str()};
  OrtValue* output_value = nullptr;
  OrtRunOptions* run_options = nullptr;
  if (OrtStatus* created = ort_api()->CreateRunOptions(&run_options); created != nullptr) {
    ort_api()->ReleaseValue(input_value);
    check(created, "CreateRunOptions");
  }
  RunDeadline::Outcome outcome = RunDeadline::Outcome::Running;
  auto wait_start = std::chrono::steady_clock::now();
  RunCost cost;
  OrtStatus* status;
  {
    const RunSlots::Place place(g_run_slots, runs_beside_others(spec_.provider));
    cost.waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wait_start).count();
    // The process's CPU, not the calling thread's: the run's work is on ONNX Runtime's pool too. It
    // also counts whatever else the process does meanwhile (another job's decode or encode), which
    // is why the benchmarks read it one job at a time.
    // On the CPU the run takes its intra-op threads' cores; with a GPU, the calling thread's only.
    const CoresInUse cores(spec_.provider == "cpu" ? spec_.threads : 1);
    const double cpu_start = process_cpu_ms();
    {
      const RunDeadline deadline(run_options, spec_.run_timeout_ms);
      status = ort_api()->Run(session_, run_options, input_names, &input_value, 1, output_names, 1, &output_value);
      outcome = deadline.outcome();
    }
    cost.cpu = process_cpu_ms() - cpu_start;
  }
  ort_api()->ReleaseValue(input_value);
  Buffer<float>().swap(input);
  ort_api()->ReleaseRunOptions(run_options);
  if (status != nullptr && outcome != RunDeadline::Outcome::Running) {
    ort_api()->ReleaseStatus(status);
    if (outcome == RunDeadline::Outcome::Stopped)
      throw PipelineError(ErrorCode::Internal, "the model's run was stopped: the process is ending");
    throw PipelineError(ErrorCode::Internal, "the model's run passed its limit of " + std::to_string(spec_.run_timeout_ms) +
                                                 " ms (inferenceTimeout) and was stopped");
  }
  check(status, "Run");
  try {
    OrtTensorTypeAndShapeInfo* info = nullptr;
    check(ort_api()->GetTensorTypeAndShape(output_value, &info), "GetTensorTypeAndShape");
    size_t count = 0;
    OrtStatus* count_status = ort_api()->GetTensorShapeElementCount(info, &count);
    ort_api()->ReleaseTensorTypeAndShapeInfo(info);
    check(count_status, "GetTensorShapeElementCount");
    if (count != plane)
      throw PipelineError(ErrorCode::Internal, "model output has " + std::to_string(count) + " values, expected " + std::to_string(plane));
    float* data = nullptr;
    check(ort_api()->GetTensorMutableData(output_value, reinterpret_cast<void**>(&data)), "GetTensorMutableData");
    if (mirrored) {
      out.resize(plane);  // no new block where `out` has its size already
      for (size_t row = 0; row < plane; row += width) std::reverse_copy(data + row, data + row + width, out.data() + row);
    } else {
      out.assign(data, data + plane);
    }
  } catch (...) {
    ort_api()->ReleaseValue(output_value);
    throw;
  }
  ort_api()->ReleaseValue(output_value);
  return cost;
}

Model::RunCost Model::infer(const Pixels& rgb, int width, int height, Plane& matte, InferOptions how) {
  const auto start = std::chrono::steady_clock::now();
  Buffer<float> tensor = input_tensor(rgb, spec_, width, height, how.mirrored);
  const double tensor_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // The matte's block is taken before the run, as the tensor's: taken after it, once the run's own
  // blocks are back in the cache (buffers.h), a warm 12 MP job mapped two blocks afresh, job after
  // job (test/lib/native-memory.test.ts).
  matte = Plane(width, height, Unfilled{});
  RunCost cost = run(std::move(tensor), width, height, matte.v, how.mirrored);
  cost.tensor = tensor_ms;
  const size_t plane = matte.v.size();
  to_matte(spec_.matte, matte.v.data(), plane);
  // The graph's answer is bytes from outside: a matte that is not a number everywhere fails the job
  // here, before anything counts on it.
  const size_t not_finite = count_not_finite(matte.v.data(), plane);
  if (not_finite > 0)
    throw PipelineError(ErrorCode::Internal, "the model's matte has " + std::to_string(not_finite) + " of " + std::to_string(plane) +
                                                 " values that are not finite numbers (NaN or infinity)");
  if (how.clamp) clamp_unit(matte);
  return cost;
}

void Model::warm_up() {
  if (spec_.warm_up_runs <= 0) return;
  const int width = spec_.dynamic_size ? spec_.warm_up_side : spec_.width;
  const int height = spec_.dynamic_size ? spec_.warm_up_side : spec_.height;
  try {
    Buffer<float> out;
    for (int r = 0; r < spec_.warm_up_runs; ++r)
      run(Buffer<float>(static_cast<size_t>(width) * height * 3, 0.f), width, height, out, false);
  } catch (const std::exception&) {
    // Only a head start: a model whose run fails (a manifest naming an input the graph lacks) still
    // loads, and its first job reports the failure, as without the warm-up.
  }
  release_memory_now();
}

}  // namespace bgone
