// The native core's asynchronous calls (a job, a model's load) run on threads of its own, not on
// libuv's pool. A job holds its thread from decode to encode, and a GPU node keeps many jobs inside
// the core at once, so that the CPU stages of some overlap the inference of others: on libuv's pool
// (4 threads unless UV_THREADPOOL_SIZE was set before Node started, which an embedder's process
// does not do for us) they would wait for each other, and take the threads that Node's file
// system, DNS lookups (a URL fetch) and zlib share. The threads are started as needed, as many as
// the calls running at once, and kept.
#pragma once
#include <napi.h>

#include <string>

namespace bgone {

// One call: Execute() on a job thread (no JavaScript value may be touched there), then OnOK or
// OnError on the JavaScript thread of the environment that queued it. The call deletes itself once
// it has answered. If its environment ends first (a worker thread that stops), the environment
// waits for Execute to return, and Abandon() is called instead of an answer, on any thread.
class NativeCall {
 public:
  explicit NativeCall(Napi::Env env) : env_(env) {}
  virtual ~NativeCall() = default;
  NativeCall(const NativeCall&) = delete;
  NativeCall& operator=(const NativeCall&) = delete;

  // Hands the call to a job thread; from here on it owns itself. Call on the JavaScript thread.
  void Queue();

 protected:
  virtual void Execute() = 0;
  virtual void OnOK(Napi::Env env) = 0;
  virtual void OnError(Napi::Env env, const std::string& message) = 0;
  // Lets go of the JavaScript references without touching the environment, which is going away.
  virtual void Abandon() {}
  // From Execute: the call answers with OnError(message) instead of OnOK.
  void SetError(const std::string& message) {
    error_ = message;
    failed_ = true;
  }
  Napi::Env Env() const { return env_; }

 private:
  friend struct CallRunner;
  Napi::Env env_;
  std::string error_;
  bool failed_ = false;
};

}  // namespace bgone
