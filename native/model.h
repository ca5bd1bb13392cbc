// One ONNX model session behind the ONNX Runtime C API (the library: ort.h). A job alone runs its model alone, on every core; beside other
// jobs at most two runs share the cores (model.cc, RunSlots).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "buffers.h"
#include "model_spec.h"
#include "pixels.h"
#include "plane.h"

struct OrtApi;
struct OrtEnv;
struct OrtSession;
struct OrtSessionOptions;
struct OrtMemoryInfo;

namespace bgone {

// How Model::infer answers.
struct InferOptions {
  // The answer for the image mirrored left to right, written back unmirrored: matte(x, y) is the
  // answer at (width - 1 - x, y).
  bool mirrored = false;
  bool clamp = true;  // the matte clamped to 0..1; false: as the transform leaves it (modelMatte)
};

class Model {
 public:
  explicit Model(const ModelSpec& spec);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelSpec& spec() const { return spec_; }
  // What the session holds for as long as it lives, on the CPU (its weights, packed for the kernels).
  size_t resident_bytes() { return weights_.bytes(); }
  // What one run cost besides its wall time (ms).
  struct RunCost {
    double tensor = 0;  // building the input tensor from the pixels, before the wait
    double waited = 0;  // waiting for a place to run (other jobs' inference)
    double cpu = 0;     // CPU time of the whole process while the model ran (all threads)
  };
  // The model's matte for `rgb`, 8-bit interleaved RGB of width x height (the size the model runs
  // at), into `matte` (width x height): the pixels become the input tensor, planar floats normalised
  // per channel by the spec's mean and std; the graph's output becomes the matte by the spec's
  // transform, then is clamped to 0..1. The tensor is released as soon as the run returns. A matte
  // that is not finite everywhere fails. Shares the cores with the other runs of the process
  // (RunSlots).
  RunCost infer(const Pixels& rgb, int width, int height, Plane& matte, InferOptions how = {});
  // The spec's warm-up runs (a failing one is ignored: the first job's run reports it), then the
  // memory they used goes back to the OS at once. ONNX Runtime's first runs of a session are slow
  // (the first about twice a warmed run), and what makes the later ones fast outlives that memory.
  void warm_up();

 private:
  std::string session_name(bool input, size_t index);
  // Runs the graph on a planar float tensor [1,3,height,width], released once the graph has run;
  // copies its output at spec_.output_index, a [height,width] plane, into `out` (of that size
  // already: no block is taken after the run) as it is, or each row reversed with `mirrored`.
  RunCost run(Buffer<float> input, int width, int height, Buffer<float>& out, bool mirrored);
  ModelSpec spec_;
  LastingArena weights_;  // on the CPU, the session's lasting memory; outlives the session (released first)
  OrtSession* session_ = nullptr;
  OrtMemoryInfo* memory_info_ = nullptr;
  std::string input_name_;   // the graph's first input
  std::string output_name_;  // the graph's output at spec_.output_index
};

}  // namespace bgone
