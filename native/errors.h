// The closed list of error codes the native core can produce. The same strings are listed in
// src/lib/errors.ts, which owns the user-facing messages; C++ only attaches a developer detail.
#pragma once
#include <stdexcept>
#include <string>

namespace bgone {

enum class ErrorCode { UnsupportedMediaType, InvalidImage, ImageTooLarge, ForegroundNotFound, Internal };

inline const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::UnsupportedMediaType:
      return "unsupported_media_type";
    case ErrorCode::InvalidImage:
      return "invalid_image";
    case ErrorCode::ImageTooLarge:
      return "image_too_large";
    case ErrorCode::ForegroundNotFound:
      return "foreground_not_found";
    case ErrorCode::Internal:
      return "internal_error";
  }
  return "internal_error";
}

class PipelineError : public std::runtime_error {
 public:
  PipelineError(ErrorCode code, const std::string& detail, bool background = false)
      : std::runtime_error(detail), code_(code), background_(background) {}
  ErrorCode code() const { return code_; }
  // The background image (not the input) caused it.
  bool background() const { return background_; }

 private:
  ErrorCode code_;
  bool background_;
};

}  // namespace bgone
