// One ONNX model session behind the ONNX Runtime C API. The runtime library is opened with dlopen
// from a path chosen in JavaScript (onnxruntime-node's copy), so the addon has no link-time
// dependency on it. A job alone runs its model alone, on every core; beside other jobs at most two
// runs share the cores (model.cc, RunSlots).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "buffers.h"

struct OrtApi;
struct OrtEnv;
struct OrtSession;
struct OrtSessionOptions;
struct OrtMemoryInfo;

namespace bgone {

// Set by addon.cc from the model's manifest entry (src/lib/models.ts); no field has a default here.
struct ModelSpec {
  std::string path;
  std::string input_name;
  std::string output_name;
  int width = 0;
  int height = 0;
  float mean[3] = {};
  float std[3] = {};
  int threads = 0;            // intra-op threads, chosen in TypeScript (src/lib/settings.ts inferenceThreadCount)
  bool dynamic_size = false;  // the graph's input height and width are symbolic: any job size works
  // Execution provider (providers.h): "cpu" or "cuda"; with "cuda", the GPU's index and the most GPU
  // memory ONNX Runtime's arena may take (MiB, 0: no limit).
  std::string provider;
  int device_id = 0;
  long long gpu_mem_limit_mb = 0;
  // Runs of the model on a blank warm_up_side² input right after loading (0: none): see warm_up.
  int warm_up_runs = 0;
  int warm_up_side = 0;
};

// Loads libonnxruntime once per process; later calls with another path are ignored.
void load_onnxruntime(const std::string& library_path);

class Model {
 public:
  explicit Model(const ModelSpec& spec);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelSpec& spec() const { return spec_; }
  // What one run cost besides its wall time (ms).
  struct RunCost {
    double waited = 0;  // waiting for a place to run (other jobs' inference)
    double cpu = 0;     // CPU time of the whole process while the model ran (all threads)
  };
  // Runs the model on a planar float tensor [1,3,height,width]; writes the [height,width] output
  // plane into `out`. Shares the cores with the other runs of the process (RunSlots).
  RunCost run(Buffer<float>& input, int width, int height, Buffer<float>& out);
  // The spec's warm-up runs (a failing one is ignored: the first job's run reports it), then the
  // memory they used goes back to the OS at once. ONNX Runtime's
  // first runs of a session are slow (at 1024² on the CPU: about 650 and 470 ms, then 340-350 ms,
  // as fast as a warmed bare session), and what makes the later ones fast outlives that memory.
  void warm_up();

 private:
  ModelSpec spec_;
  LastingArena weights_;  // on the CPU, the session's lasting memory; outlives the session (released first)
  OrtSession* session_ = nullptr;
  OrtMemoryInfo* memory_info_ = nullptr;
};

}  // namespace bgone
