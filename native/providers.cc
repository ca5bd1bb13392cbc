#include "providers.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"
#include "ort.h"

namespace bgone {
namespace {

// What the CUDA and TensorRT providers need (docs/operations.md, "GPU deployment").
const char* const kCudaNeeds =
    "The CUDA provider needs libonnxruntime_providers_shared.so and libonnxruntime_providers_cuda.so built for the same ONNX Runtime "
    "version, in the folder of the loaded library, the CUDA and cuDNN it was built for on the library path (onnxruntime-node 1.30's, "
    "fetched by its postinstall: CUDA 12 and cuDNN 9; com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9's, for the 1.29 core of "
    "com.github.asus4.onnxruntime@0.4.9: CUDA 13's libcudart.so.13, libcublas.so.13, libcublasLt.so.13 and libcurand.so.10, "
    "and cuDNN 9's libcudnn.so.9), and the NVIDIA driver";
const char* const kTensorRtNeeds =
    "The TensorRT provider needs libonnxruntime_providers_tensorrt.so beside the loaded library, with TensorRT 10 (libnvinfer.so.10), "
    "and everything the CUDA provider needs";

std::string take_reason(const OrtApi* api, OrtStatus* status) {
  std::string reason = api->GetErrorMessage(status);
  api->ReleaseStatus(status);
  while (!reason.empty() && (std::isspace(static_cast<unsigned char>(reason.back())) || reason.back() == '.')) reason.pop_back();
  return reason;
}

// "the loaded ONNX Runtime 1.30.0 (/path/libonnxruntime.so.1)"
std::string loaded_runtime() {
  const std::string& path = ort_library_path();
  const std::string& version = ort_version();
  return "the loaded ONNX Runtime" + (version.empty() ? "" : " " + version) + (path.empty() ? "" : " (" + path + ")");
}

// The folder of the loaded library, with its trailing slash ("" if unknown).
std::string library_folder() {
  const std::string& path = ort_library_path();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// The provider library of `name` ("cuda", "tensorrt") when it is not beside the loaded runtime.
std::string missing_provider_library(const char* name) {
  const std::string folder = library_folder();
  if (folder.empty()) return "";
  const std::string file = std::string("libonnxruntime_providers_") + name + ".so";
  if (file_exists(folder + file)) return "";
  return file + " is not in " + folder + ". ";
}

// Takes the status (released here) and returns the ProviderError to throw.
ProviderError gpu_unavailable(const OrtApi* api, OrtStatus* status, const char* provider, const char* label, const std::string& step) {
  const std::string reason = take_reason(api, status);
  const bool trt = std::string(provider) == "tensorrt";
  return ProviderError(loaded_runtime() + " has no usable " + label + " execution provider: " + step + " failed: " + reason + ". " +
                       missing_provider_library(provider) + (trt ? kTensorRtNeeds : kCudaNeeds) + ".");
}

// The CUDA options bgone sets, as key/value strings (both routes below take them so); the plugin
// route takes the device from its OrtEpDevice instead of a device_id option.
struct CudaOptions {
  // values point into device_id and mem_limit: never copied.
  CudaOptions(const CudaOptions&) = delete;
  CudaOptions& operator=(const CudaOptions&) = delete;
  CudaOptions(const ModelSpec& spec, bool with_device_id)
      : device_id(std::to_string(spec.device_id)), mem_limit(std::to_string(spec.gpu_mem_limit_mb * 1024 * 1024)) {
    if (with_device_id) {
      keys.push_back("device_id");
      values.push_back(device_id.c_str());
    }
    // kSameAsRequested: the arena grows by what is asked, not by doubling, so the GPU memory held
    // stays near the model's real peak. HEURISTIC: cuDNN's exhaustive search of convolution
    // algorithms, per input shape, costs more than the runs it would speed up.
    keys.insert(keys.end(), {"arena_extend_strategy", "cudnn_conv_algo_search"});
    values.insert(values.end(), {"kSameAsRequested", "HEURISTIC"});
    if (spec.gpu_mem_limit_mb > 0) {
      keys.push_back("gpu_mem_limit");
      values.push_back(mem_limit.c_str());
    }
  }
  std::string device_id;
  std::string mem_limit;
  std::vector<const char*> keys;
  std::vector<const char*> values;
};

// A core built without CUDA answers CreateCUDAProviderOptions so.
bool built_without(const std::string& reason) { return reason.find("not enabled in this build") != std::string::npos; }

// The CUDA provider library as a plugin of a core built without CUDA (com.github.asus4.onnxruntime
// 1.29's): the library exports CreateEpFactories, so the core can load it by path
// (RegisterExecutionProviderLibrary, once per process) and list a device per NVIDIA GPU, whose
// ep options carry the CUDA device index.
void append_cuda_plugin(const OrtApi* api, OrtSessionOptions* options, const ModelSpec& spec, const char* provider, const char* label) {
  static std::mutex mutex;
  static bool registered = false;
  const std::string library = library_folder() + "libonnxruntime_providers_cuda.so";
  OrtEnv* env = ort_env();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!registered) {
      if (!file_exists(library)) {
        throw ProviderError(loaded_runtime() + " was built without the " + label + " execution provider, and " +
                            missing_provider_library("cuda") + kCudaNeeds + ".");
      }
      OrtStatus* status = api->RegisterExecutionProviderLibrary(env, "bgone-cuda", library.c_str());
      if (status != nullptr) throw gpu_unavailable(api, status, provider, label, "RegisterExecutionProviderLibrary(" + library + ")");
      registered = true;
    }
  }
  const OrtEpDevice* const* devices = nullptr;
  size_t count = 0;
  OrtStatus* status = api->GetEpDevices(env, &devices, &count);
  if (status != nullptr) throw gpu_unavailable(api, status, provider, label, "GetEpDevices");
  const OrtEpDevice* chosen = nullptr;
  std::string indexes;
  const CudaOptions cuda(spec, false);
  for (size_t i = 0; i < count; ++i) {
    if (std::string(api->EpDevice_EpName(devices[i])) != "CUDAExecutionProvider") continue;
    const char* index = api->GetKeyValue(api->EpDevice_EpOptions(devices[i]), "device_id");
    const std::string text = index == nullptr ? "0" : index;
    indexes += (indexes.empty() ? "" : ", ") + text;
    if (text == cuda.device_id) chosen = devices[i];
  }
  if (chosen == nullptr) {
    throw ProviderError(
        loaded_runtime() + " loaded its " + label + " execution provider from " + library + ", which " +
        (indexes.empty() ? std::string("found no NVIDIA GPU") : "has no GPU " + cuda.device_id + " (its GPUs: " + indexes + ")") +
        ". ONNX Runtime lists GPUs from /sys/class/drm/card*/device and the provider counts them "
        "through the CUDA runtime: the NVIDIA driver (libcuda.so.1, nvidia-smi) must see the GPU.");
  }
  status = api->SessionOptionsAppendExecutionProvider_V2(options, env, &chosen, 1, cuda.keys.data(), cuda.values.data(), cuda.keys.size());
  if (status != nullptr) throw gpu_unavailable(api, status, provider, label, "SessionOptionsAppendExecutionProvider_V2");
}

void append_cuda(const OrtApi* api, OrtSessionOptions* options, const ModelSpec& spec, const char* provider, const char* label) {
  // onnxruntime-node's Linux build (CUDA through provider libraries it does not ship) fails at the
  // update, when it looks for those libraries; a core built without CUDA fails at the creation,
  // and takes the provider library as a plugin instead.
  OrtCUDAProviderOptionsV2* cuda = nullptr;
  OrtStatus* status = api->CreateCUDAProviderOptions(&cuda);
  if (status != nullptr) {
    if (built_without(api->GetErrorMessage(status))) {
      api->ReleaseStatus(status);
      return append_cuda_plugin(api, options, spec, provider, label);
    }
    throw gpu_unavailable(api, status, provider, label, "CreateCUDAProviderOptions");
  }
  try {
    const CudaOptions set(spec, true);
    status = api->UpdateCUDAProviderOptions(cuda, set.keys.data(), set.values.data(), set.keys.size());
    if (status != nullptr) throw gpu_unavailable(api, status, provider, label, "UpdateCUDAProviderOptions");
    status = api->SessionOptionsAppendExecutionProvider_CUDA_V2(options, cuda);
    if (status != nullptr) throw gpu_unavailable(api, status, provider, label, "SessionOptionsAppendExecutionProvider_CUDA_V2");
  } catch (...) {
    api->ReleaseCUDAProviderOptions(cuda);
    throw;
  }
  api->ReleaseCUDAProviderOptions(cuda);
}

void append_tensorrt(const OrtApi* api, OrtSessionOptions* options, const ModelSpec& spec) {
  OrtTensorRTProviderOptionsV2* trt = nullptr;
  OrtStatus* status = api->CreateTensorRTProviderOptions(&trt);
  if (status != nullptr) {
    // Unlike CUDA's, the TensorRT provider library is not a plugin (no CreateEpFactories).
    if (built_without(api->GetErrorMessage(status))) {
      const std::string reason = take_reason(api, status);
      throw ProviderError(loaded_runtime() + " was built without the TensorRT execution provider (" + reason +
                          "), and TensorRT's provider library cannot be loaded into it as a plugin: TensorRT needs an ONNX "
                          "Runtime built with it, such as Microsoft's onnxruntime-gpu build, with its provider libraries beside it. " +
                          kTensorRtNeeds + ".");
    }
    throw gpu_unavailable(api, status, "tensorrt", "TensorRT", "CreateTensorRTProviderOptions");
  }
  try {
    const std::string device_id = std::to_string(spec.device_id);
    std::vector<const char*> keys = {"device_id"};
    std::vector<const char*> values = {device_id.c_str()};
    // Without a cache TensorRT builds its engines again at every start, which takes minutes. ONNX
    // Runtime names each engine after the graph and the GPU's compute capability, so one folder
    // serves several models and GPUs; the timing cache speeds up the build of a new engine.
    if (!spec.tensorrt_cache_dir.empty()) {
      for (const char* key : {"trt_engine_cache_enable", "trt_timing_cache_enable"}) {
        keys.push_back(key);
        values.push_back("1");
      }
      for (const char* key : {"trt_engine_cache_path", "trt_timing_cache_path"}) {
        keys.push_back(key);
        values.push_back(spec.tensorrt_cache_dir.c_str());
      }
    }
    status = api->UpdateTensorRTProviderOptions(trt, keys.data(), values.data(), keys.size());
    if (status != nullptr) throw gpu_unavailable(api, status, "tensorrt", "TensorRT", "UpdateTensorRTProviderOptions");
    status = api->SessionOptionsAppendExecutionProvider_TensorRT_V2(options, trt);
    if (status != nullptr) throw gpu_unavailable(api, status, "tensorrt", "TensorRT", "SessionOptionsAppendExecutionProvider_TensorRT_V2");
  } catch (...) {
    api->ReleaseTensorRTProviderOptions(trt);
    throw;
  }
  api->ReleaseTensorRTProviderOptions(trt);
  // The nodes TensorRT does not take run on CUDA rather than on the CPU.
  append_cuda(api, options, spec, "tensorrt", "TensorRT");
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

namespace {

// What the Vulkan loader lists, surveyed once per process before Dawn (the WebGPU provider's
// implementation) opens it. Vulkan's C API is called through the loader's own entry point with the
// few structures it needs laid out here (their layout is Vulkan 1.0's ABI): bgone ships no Vulkan
// headers and links nothing of it.
struct VulkanDevice {
  int type = 0;  // VkPhysicalDeviceType: 1 integrated, 2 discrete, 3 virtual GPU, 4 CPU, 0 other
  std::string name;
};
struct VulkanSurvey {
  bool loader = false;
  int create_result = 0;  // vkCreateInstance's VkResult (0: VK_SUCCESS)
  std::vector<VulkanDevice> devices;
};

constexpr int kVkPhysicalDeviceTypeCpu = 4;

struct VkApplicationInfoAbi {
  int32_t sType;  // VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
  const void* pNext;
  const char* pApplicationName;
  uint32_t applicationVersion;
  const char* pEngineName;
  uint32_t engineVersion;
  uint32_t apiVersion;
};
struct VkInstanceCreateInfoAbi {
  int32_t sType;  // VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
  const void* pNext;
  uint32_t flags;
  const VkApplicationInfoAbi* pApplicationInfo;
  uint32_t enabledLayerCount;
  const char* const* ppEnabledLayerNames;
  uint32_t enabledExtensionCount;
  const char* const* ppEnabledExtensionNames;
};
using VkVoidFunction = void (*)();
using GetInstanceProcAddr = VkVoidFunction (*)(void* instance, const char* name);
using CreateInstance = int32_t (*)(const VkInstanceCreateInfoAbi*, const void* allocator, void** instance);
using DestroyInstance = void (*)(void* instance, const void* allocator);
using EnumeratePhysicalDevices = int32_t (*)(void* instance, uint32_t* count, void** devices);
using GetPhysicalDeviceProperties = void (*)(void* device, void* properties);

VulkanSurvey survey_vulkan() {
  VulkanSurvey out;
  // Dawn opens the loader by this name: a loader found here is the one it finds. It stays open.
  void* loader = dlopen("libvulkan.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (loader == nullptr) return out;
  out.loader = true;
  auto proc = reinterpret_cast<GetInstanceProcAddr>(dlsym(loader, "vkGetInstanceProcAddr"));
  auto create = proc == nullptr ? nullptr : reinterpret_cast<CreateInstance>(proc(nullptr, "vkCreateInstance"));
  if (create == nullptr) {
    out.create_result = -1;
    return out;
  }
  VkApplicationInfoAbi app{0, nullptr, "bgone", 1, "bgone", 1, (1u << 22) | (1u << 12)};  // Vulkan 1.1
  VkInstanceCreateInfoAbi info{1, nullptr, 0, &app, 0, nullptr, 0, nullptr};
  void* instance = nullptr;
  out.create_result = create(&info, nullptr, &instance);
  if (out.create_result != 0 || instance == nullptr) return out;
  auto destroy = reinterpret_cast<DestroyInstance>(proc(instance, "vkDestroyInstance"));
  auto enumerate = reinterpret_cast<EnumeratePhysicalDevices>(proc(instance, "vkEnumeratePhysicalDevices"));
  auto properties = reinterpret_cast<GetPhysicalDeviceProperties>(proc(instance, "vkGetPhysicalDeviceProperties"));
  uint32_t count = 0;
  if (enumerate != nullptr && properties != nullptr && enumerate(instance, &count, nullptr) >= 0 && count > 0) {
    std::vector<void*> handles(count);
    if (enumerate(instance, &count, handles.data()) >= 0) {
      for (uint32_t i = 0; i < count; ++i) {
        // VkPhysicalDeviceProperties is 824 bytes: four uint32s, the device type at byte 16 and the
        // NUL-terminated name (256 bytes) at byte 20.
        alignas(16) unsigned char props[2048] = {};
        properties(handles[i], props);
        VulkanDevice device;
        std::memcpy(&device.type, props + 16, sizeof device.type);
        props[20 + 255] = 0;
        device.name = reinterpret_cast<const char*>(props + 20);
        out.devices.push_back(std::move(device));
      }
    }
  }
  if (destroy != nullptr) destroy(instance, nullptr);
  return out;
}

const VulkanSurvey& vulkan_survey() {
  static const VulkanSurvey survey = survey_vulkan();
  return survey;
}

// "SwiftShader Device (Subzero) (CPU), NVIDIA H100 80GB HBM3 (GPU)"
std::string device_list(const VulkanSurvey& survey) {
  std::string out;
  for (const VulkanDevice& d : survey.devices) {
    if (!out.empty()) out += ", ";
    out += d.name + (d.type == kVkPhysicalDeviceTypeCpu ? " (CPU)" : " (GPU)");
  }
  return out;
}

// The device Dawn takes for high performance: a discrete GPU before an integrated one, a virtual
// one, another kind, and a CPU device last (VkPhysicalDeviceType 2, 1, 3, 0, 4); null without any.
const VulkanDevice* preferred_device(const VulkanSurvey& survey) {
  static const int kPreference[] = {2, 1, 3, 0, kVkPhysicalDeviceTypeCpu};
  for (int type : kPreference)
    for (const VulkanDevice& d : survey.devices)
      if (d.type == type) return &d;
  // A type outside Vulkan's list: the first device, taken as a GPU.
  return survey.devices.empty() ? nullptr : &survey.devices.front();
}

const char* const kWebGpuNeeds =
    "WebGPU runs over Vulkan on Linux: it needs the Vulkan loader (libvulkan.so.1, Debian's libvulkan1) and a GPU driver with "
    "Vulkan support (NVIDIA's driver with its Vulkan ICD, nvidia_icd.json; Mesa's for AMD and Intel)";

// Why the WebGPU provider has no GPU to run on ("" when the loader lists one, or when a CPU
// device is allowed and listed).
std::string webgpu_missing(const VulkanSurvey& survey, bool cpu_adapter) {
  if (!survey.loader) return "The Vulkan loader (libvulkan.so.1) is not installed. " + std::string(kWebGpuNeeds);
  if (survey.create_result != 0)
    return "The Vulkan loader found no driver (vkCreateInstance answered VkResult " + std::to_string(survey.create_result) + "). " +
           kWebGpuNeeds;
  if (survey.devices.empty()) return "The Vulkan loader lists no device. " + std::string(kWebGpuNeeds);
  if (preferred_device(survey)->type == kVkPhysicalDeviceTypeCpu && !cpu_adapter)
    return "The Vulkan loader lists only CPU devices (" + device_list(survey) +
           "): WebGPU on a CPU runs many times slower than the cpu provider, so bgone does not take one unless the "
           "webgpuCpuAdapter setting (BGONE_WEBGPU_CPU_ADAPTER=true) allows it, for checks. " +
           kWebGpuNeeds;
  return "";
}

}  // namespace

std::string webgpu_device() {
  const VulkanDevice* device = preferred_device(vulkan_survey());
  return device == nullptr ? "" : device->name;
}

ProviderError webgpu_unavailable(const std::string& step, const std::string& reason) {
  const VulkanSurvey& survey = vulkan_survey();
  std::string why = webgpu_missing(survey, true);
  if (why.empty()) why = "The Vulkan loader lists " + device_list(survey) + ", and Dawn took none of them. " + kWebGpuNeeds;
  return ProviderError(loaded_runtime() + " could not start its WebGPU execution provider: " + step + " failed: " + reason + ". " + why +
                       ".");
}

bool is_webgpu_failure(const std::string& message) {
  for (const char* mark : {"WebGPU", "webgpu", "adapter", "Dawn", "Vulkan"})
    if (message.find(mark) != std::string::npos) return true;
  return false;
}

void append_execution_provider(OrtSessionOptions* options, const ModelSpec& spec) {
  const OrtApi* api = ort_api();
  if (spec.provider == "cpu") return;
  if (spec.provider == "cuda") return append_cuda(api, options, spec, "cuda", "CUDA");
  if (spec.provider == "tensorrt") return append_tensorrt(api, options, spec);
  if (spec.provider == "webgpu") {
    const std::string missing = webgpu_missing(vulkan_survey(), spec.webgpu_cpu_adapter);
    if (!missing.empty()) throw ProviderError(loaded_runtime() + " could not start its WebGPU execution provider. " + missing + ".");
    OrtStatus* status = api->SessionOptionsAppendExecutionProvider(options, "WebGPU", nullptr, nullptr, 0);
    if (status != nullptr) throw webgpu_unavailable("SessionOptionsAppendExecutionProvider(WebGPU)", take_reason(api, status));
    return;
  }
  throw PipelineError(ErrorCode::Internal, "unknown execution provider \"" + spec.provider + "\"");
}

}  // namespace bgone
