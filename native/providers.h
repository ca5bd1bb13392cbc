// Execution providers: where a model's session runs. "cpu" is ONNX Runtime's default and needs
// nothing; "cuda" appends the CUDA execution provider, which only a GPU build of ONNX Runtime (its
// provider libraries beside libonnxruntime, CUDA 12, cuDNN 9, the NVIDIA driver) can give.
#pragma once
#include <string>
#include <vector>

#include "errors.h"
#include "model_spec.h"

struct OrtSessionOptions;

namespace bgone {

// The configured execution provider cannot be set up with the loaded ONNX Runtime. An Internal
// PipelineError; addon.cc marks the rejected loadModel promise so that TypeScript can say so.
class ProviderError : public PipelineError {
 public:
  explicit ProviderError(const std::string& detail) : PipelineError(ErrorCode::Internal, detail) {}
};

// The execution providers the loaded runtime was built with (OrtApi::GetAvailableProviders), e.g.
// {"CUDAExecutionProvider", "CPUExecutionProvider"}. A provider listed here may still fail to load
// (its libraries, CUDA or cuDNN missing): only appending it tells.
std::vector<std::string> available_providers();

// Appends the execution provider of `spec` to the session options (nothing for "cpu"). Throws
// ProviderError when the runtime cannot give it, with what a GPU deployment needs.
void append_execution_provider(OrtSessionOptions* options, const ModelSpec& spec);

}  // namespace bgone
