#include "ort.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "errors.h"
#include "onnxruntime_c_api.h"

namespace bgone {
namespace {

std::mutex g_load_mutex;
const OrtApi* g_api = nullptr;
OrtEnv* g_env = nullptr;
std::string g_library_path;
std::string g_version;

}  // namespace

void load_onnxruntime(const std::string& library_path) {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (g_api != nullptr) return;
  // ONNX Runtime's Linux build otherwise starts telemetry that writes files under $TMPDIR and
  // $HOME/.cache when the environment is created: a self-hosted service must not phone home or
  // touch the disk. Only this variable, set before CreateEnv, stops it (measured on 1.30).
  setenv("ORT_DISABLE_TELEMETRY", "1", 1);
  // RTLD_LOCAL: onnxruntime-node may load its own copy of the same library into the process.
  void* handle = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw PipelineError(ErrorCode::Internal, std::string("cannot load ONNX Runtime: ") + dlerror());
  using GetApiBase = const OrtApiBase* (*)();
  auto get_api_base = reinterpret_cast<GetApiBase>(dlsym(handle, "OrtGetApiBase"));
  if (get_api_base == nullptr) throw PipelineError(ErrorCode::Internal, "OrtGetApiBase not found in " + library_path);
  const OrtApi* api = get_api_base()->GetApi(ORT_API_VERSION);
  if (api == nullptr)
    throw PipelineError(ErrorCode::Internal, "ONNX Runtime does not provide C API version " + std::to_string(ORT_API_VERSION));
  OrtEnv* env = nullptr;
  OrtStatus* status = api->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "bgone", &env);
  if (status != nullptr) {
    const std::string message = std::string("CreateEnv: ") + api->GetErrorMessage(status);
    api->ReleaseStatus(status);
    throw PipelineError(ErrorCode::Internal, message);
  }
  g_api = api;
  g_env = env;
  g_version = get_api_base()->GetVersionString();
  g_library_path = library_path;
}

const OrtApi* ort_api() {
  if (g_api == nullptr) throw PipelineError(ErrorCode::Internal, "ONNX Runtime is not loaded");
  return g_api;
}

OrtEnv* ort_env() {
  ort_api();
  return g_env;
}

const std::string& ort_library_path() { return g_library_path; }

const std::string& ort_version() { return g_version; }

void ort_check(OrtStatus* status, const char* what) {
  if (status == nullptr) return;
  const OrtApi* api = ort_api();
  const std::string message = std::string(what) + ": " + api->GetErrorMessage(status);
  api->ReleaseStatus(status);
  throw PipelineError(ErrorCode::Internal, message);
}

}  // namespace bgone
