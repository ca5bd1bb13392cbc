// Execution providers: where a model's session runs. "cpu" is ONNX Runtime's default and needs
// nothing; "cuda" appends the CUDA execution provider, which only a GPU build of ONNX Runtime (its
// provider libraries beside libonnxruntime, CUDA 12, cuDNN 9, the NVIDIA driver) can give. The
// runtime the addon opened is bound here once (addon.cc init), for the list of its providers.
#pragma once
#include <string>
#include <vector>

#include "errors.h"
#include "model.h"

struct OrtApi;
struct OrtSessionOptions;

namespace bgone {

// The configured execution provider cannot be set up with the loaded ONNX Runtime. An Internal
// PipelineError; addon.cc marks the rejected loadModel promise so that TypeScript can say so.
class ProviderError : public PipelineError {
 public:
  explicit ProviderError(const std::string& detail) : PipelineError(ErrorCode::Internal, detail) {}
};

// Binds the ONNX Runtime library that load_onnxruntime opened (the same path: it is not loaded a
// second time). The first call wins, as for load_onnxruntime.
void bind_provider_runtime(const std::string& library_path);

// The execution providers the bound runtime was built with (OrtApi::GetAvailableProviders), e.g.
// {"CUDAExecutionProvider", "CPUExecutionProvider"}. A provider listed here may still fail to load
// (its libraries, CUDA or cuDNN missing): only appending it tells.
std::vector<std::string> available_providers();

// Appends the execution provider of `spec` to the session options (nothing for "cpu"). Throws
// ProviderError when the runtime cannot give it, with what a GPU deployment needs.
void append_execution_provider(const OrtApi* api, OrtSessionOptions* options, const ModelSpec& spec);

}  // namespace bgone
