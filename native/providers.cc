#include "providers.h"

#include <cctype>

#include "onnxruntime_c_api.h"
#include "ort.h"

namespace bgone {
namespace {

// What a GPU deployment needs, for the messages below (README.md, "GPU deployment").
const char* const kGpuNeeds =
    "A GPU deployment needs a GPU build of ONNX Runtime 1.30 for CUDA 12 (libonnxruntime.so.1 with "
    "libonnxruntime_providers_shared.so and libonnxruntime_providers_cuda.so in the same folder), cuDNN 9 and the NVIDIA driver";

// Takes the status (released here) and returns the ProviderError to throw.
ProviderError cuda_unavailable(const OrtApi* api, OrtStatus* status, const char* step) {
  std::string reason = api->GetErrorMessage(status);
  api->ReleaseStatus(status);
  while (!reason.empty() && (std::isspace(static_cast<unsigned char>(reason.back())) || reason.back() == '.')) reason.pop_back();
  const std::string& path = ort_library_path();
  const std::string library = path.empty() ? "" : " (" + path + ")";
  return ProviderError("the loaded ONNX Runtime" + library + " has no usable CUDA execution provider: " + step + " failed: " + reason +
                       ". " + kGpuNeeds + ".");
}

}  // namespace

std::vector<std::string> available_providers() {
  const OrtApi* api = ort_api();
  char** names = nullptr;
  int count = 0;
  OrtStatus* status = api->GetAvailableProviders(&names, &count);
  if (status != nullptr) {
    const std::string message = std::string("GetAvailableProviders: ") + api->GetErrorMessage(status);
    api->ReleaseStatus(status);
    throw PipelineError(ErrorCode::Internal, message);
  }
  std::vector<std::string> out(names, names + count);
  OrtStatus* released = api->ReleaseAvailableProviders(names, count);
  if (released != nullptr) api->ReleaseStatus(released);
  return out;
}

void append_execution_provider(OrtSessionOptions* options, const ModelSpec& spec) {
  const OrtApi* api = ort_api();
  if (spec.provider == "cpu") return;
  if (spec.provider != "cuda") throw PipelineError(ErrorCode::Internal, "unknown execution provider \"" + spec.provider + "\"");
  // A runtime built without CUDA fails here; onnxruntime-node's Linux build (CUDA through provider
  // libraries it does not ship) fails at the update, when it looks for those libraries.
  OrtCUDAProviderOptionsV2* cuda = nullptr;
  OrtStatus* status = api->CreateCUDAProviderOptions(&cuda);
  if (status != nullptr) throw cuda_unavailable(api, status, "CreateCUDAProviderOptions");
  try {
    const std::string device_id = std::to_string(spec.device_id);
    const std::string mem_limit = std::to_string(spec.gpu_mem_limit_mb * 1024 * 1024);
    // kSameAsRequested: the arena grows by what is asked, not by doubling, so the GPU memory held
    // stays near the model's real peak.
    std::vector<const char*> keys = {"device_id", "arena_extend_strategy"};
    std::vector<const char*> values = {device_id.c_str(), "kSameAsRequested"};
    if (spec.gpu_mem_limit_mb > 0) {
      keys.push_back("gpu_mem_limit");
      values.push_back(mem_limit.c_str());
    }
    status = api->UpdateCUDAProviderOptions(cuda, keys.data(), values.data(), keys.size());
    if (status != nullptr) throw cuda_unavailable(api, status, "UpdateCUDAProviderOptions");
    status = api->SessionOptionsAppendExecutionProvider_CUDA_V2(options, cuda);
    if (status != nullptr) throw cuda_unavailable(api, status, "SessionOptionsAppendExecutionProvider_CUDA_V2");
  } catch (...) {
    api->ReleaseCUDAProviderOptions(cuda);
    throw;
  }
  api->ReleaseCUDAProviderOptions(cuda);
}

}  // namespace bgone
