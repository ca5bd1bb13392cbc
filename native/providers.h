// Execution providers: where a model's session runs. "cpu" is ONNX Runtime's default and needs
// nothing; "cuda" and "tensorrt" append the CUDA (or TensorRT, then CUDA) execution provider, which
// only a runtime with those provider libraries beside it, the CUDA and cuDNN they were built for and
// the NVIDIA driver can give; "webgpu" appends ONNX Runtime's WebGPU provider (Dawn over Vulkan: the
// Vulkan loader and a GPU driver with Vulkan support; a loader listing only CPU devices is refused
// unless the spec allows one).
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

// The name of the Vulkan device the WebGPU provider runs on, as the loader names it: the one Dawn
// takes for high performance (a discrete GPU before an integrated one, before a virtual one, before
// a CPU device); "" without a loader or a device.
std::string webgpu_device();

// The ProviderError of a WebGPU provider that could not start at `step` for `reason`, with what the
// Vulkan loader lists (or that it is missing).
ProviderError webgpu_unavailable(const std::string& step, const std::string& reason);

// Whether CreateSession's message with the WebGPU provider is the provider's (no adapter, Dawn,
// Vulkan) rather than the model's.
bool is_webgpu_failure(const std::string& message);

}  // namespace bgone
