// What a model session is made of: the numbers TypeScript chose for it (src/lib/models.ts).
#pragma once
#include <string>

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

}  // namespace bgone
