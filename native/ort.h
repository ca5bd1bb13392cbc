// The ONNX Runtime library: opened once per process with dlopen from a path chosen in JavaScript
// (onnxruntime-node's copy, or the prebuild's), so the addon has no link-time dependency on it.
// Every other file reaches the C API through ort_api().
#pragma once
#include <string>

struct OrtApi;
struct OrtEnv;
struct OrtStatus;

namespace bgone {

// Opens the library and creates the process's environment; later calls (any path) are ignored.
void load_onnxruntime(const std::string& library_path);
// The C API of the loaded library; throws an Internal PipelineError before load_onnxruntime.
const OrtApi* ort_api();
// The environment every session is created in.
OrtEnv* ort_env();
// The path the library was loaded from ("" before).
const std::string& ort_library_path();
// The loaded library's version, e.g. "1.30.0" ("" before).
const std::string& ort_version();
// Throws an Internal PipelineError "what: message" for a failed status (released here).
void ort_check(OrtStatus* status, const char* what);

}  // namespace bgone
