// Strict reading of the plain objects that src/lib hands to the addon (job options, model spec,
// init). TypeScript owns the defaults and the user-facing validation; these objects are built by our
// own code, so a missing field, a value of the wrong type or out of the range the C++ code can work
// with, or a field nobody reads is a programming error: it throws ContractError, which the N-API
// entry points turn into a JavaScript TypeError. Nothing here falls back to a default.
#pragma once
#include <napi.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bgone {

class ContractError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class FieldReader {
 public:
  // `what` names the object in messages, e.g. "options" -> "options.format must be ...".
  FieldReader(const Napi::Value& value, std::string what) : what_(std::move(what)) {
    if (!value.IsObject() || value.IsArray() || value.IsFunction()) throw ContractError(what_ + " must be a plain object");
    object_ = value.As<Napi::Object>();
  }

  std::string string(const char* key) {
    Napi::Value v = get(key);
    if (!v.IsString()) fail(key, "a string");
    return v.As<Napi::String>().Utf8Value();
  }

  bool boolean(const char* key) {
    Napi::Value v = get(key);
    if (!v.IsBoolean()) fail(key, "a boolean");
    return v.As<Napi::Boolean>().Value();
  }

  // A finite number in [min, max].
  double number(const char* key, double min, double max) { return to_number(get(key), key, min, max, false); }

  // An integer in [min, max].
  long long integer(const char* key, long long min, long long max) {
    return static_cast<long long>(to_number(get(key), key, static_cast<double>(min), static_cast<double>(max), true));
  }

  // One of the listed strings, mapped to its value.
  template <typename T, size_t N>
  T choice(const char* key, const std::pair<const char*, T> (&choices)[N]) {
    const std::string value = string(key);
    std::string allowed;
    for (const auto& c : choices) {
      if (value == c.first) return c.second;
      allowed += (allowed.empty() ? "" : ", ") + std::string(c.first);
    }
    fail(key, "one of " + allowed);
  }

  // An array of exactly `count` numbers in [min, max] (integers if `integral`).
  std::vector<double> numbers(const char* key, size_t count, double min, double max, bool integral) {
    return to_numbers(get(key), key, count, min, max, integral);
  }

  // Like numbers(), but null is allowed and gives an empty vector.
  std::vector<double> nullable_numbers(const char* key, size_t count, double min, double max, bool integral) {
    Napi::Value v = get(key);
    if (v.IsNull()) return {};
    return to_numbers(v, key, count, min, max, integral);
  }

  // Throws unless every enumerable property of the object was read: a field that C++ ignored would
  // be an option that silently does nothing.
  void finish() const {
    Napi::Array names = object_.GetPropertyNames();
    for (uint32_t i = 0; i < names.Length(); ++i) {
      const std::string name = names.Get(i).As<Napi::String>().Utf8Value();
      bool known = false;
      for (const char* key : read_) known = known || name == key;
      if (!known) throw ContractError(what_ + "." + name + " is not a field the native core reads");
    }
  }

 private:
  Napi::Value get(const char* key) {
    read_.push_back(key);
    if (!object_.HasOwnProperty(key)) fail(key, "present");
    return object_.Get(key);
  }

  double to_number(const Napi::Value& v, const std::string& key, double min, double max, bool integral) const {
    if (!v.IsNumber()) fail(key, "a number");
    const double d = v.As<Napi::Number>().DoubleValue();
    if (!std::isfinite(d) || d < min || d > max || (integral && d != std::floor(d))) {
      fail(key, std::string(integral ? "an integer" : "a number") + " in [" + format(min) + ", " + format(max) + "], got " + format(d));
    }
    return d;
  }

  std::vector<double> to_numbers(const Napi::Value& v, const char* key, size_t count, double min, double max, bool integral) const {
    if (!v.IsArray() || v.As<Napi::Array>().Length() != count) fail(key, "an array of " + std::to_string(count) + " numbers");
    Napi::Array array = v.As<Napi::Array>();
    std::vector<double> out(count);
    for (uint32_t i = 0; i < count; ++i)
      out[i] = to_number(array.Get(i), std::string(key) + "[" + std::to_string(i) + "]", min, max, integral);
    return out;
  }

  static std::string format(double d) {
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", d);
    return text;
  }

  [[noreturn]] void fail(const std::string& key, const std::string& expected) const {
    throw ContractError(what_ + "." + key + " must be " + expected);
  }

  Napi::Object object_;
  std::string what_;
  std::vector<const char*> read_;
};

}  // namespace bgone
