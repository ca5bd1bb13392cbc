// What a model session is made of: the numbers TypeScript chose for it (src/lib/models.ts).
#pragma once
#include <string>

namespace bgone {

// How the chosen output becomes a matte in 0..1 before Model::infer clamps it (src/lib/model-families.ts
// MATTE_TRANSFORMS gives the numbers): as the graph gives it, through the logistic function, or
// stretched so that its smallest value is 0 and its largest 1.
enum class MatteTransform { AsIs = 0, Sigmoid = 1, MinMax = 2 };

// Set by addon.cc from the model's manifest entry and its family (src/lib/models.ts); no field has a
// default here. The graph's first input takes the image; its outputs are addressed by position.
struct ModelSpec {
  std::string path;
  int output_index = 0;  // which of the graph's outputs is the matte
  MatteTransform matte = MatteTransform::AsIs;
  int width = 0;
  int height = 0;
  float mean[3] = {};  // the tensor is (v - mean) / std per channel, v the 8-bit RGB value
  float std[3] = {};
  int threads = 0;            // intra-op threads, chosen in TypeScript (src/lib/settings.ts inferenceThreadCount)
  bool dynamic_size = false;  // the graph's input height and width are symbolic: any job size works
  // Execution provider (providers.h): "cpu" or "cuda"; with "cuda", the GPU's index and the most GPU
  // memory ONNX Runtime's arena may take (MiB, 0: no limit).
  std::string provider;
  int device_id = 0;
  long long gpu_mem_limit_mb = 0;
  // With "tensorrt": the existing folder where ONNX Runtime keeps the engines and the timing cache
  // TensorRT builds ("": none).
  std::string tensorrt_cache_dir;
  // With "webgpu": whether a CPU Vulkan device (SwiftShader, for checks) may run the model when the
  // loader lists no GPU.
  bool webgpu_cpu_adapter = false;
  // Runs of the model on a blank warm_up_side² input right after loading (0: none): see warm_up.
  int warm_up_runs = 0;
  int warm_up_side = 0;
  // The longest a run may take, in ms (0: no limit): a run past it is stopped (run_deadline.h) and
  // fails its job.
  long long run_timeout_ms = 0;
};

}  // namespace bgone
