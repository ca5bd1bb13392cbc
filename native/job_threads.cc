#include "job_threads.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>

namespace bgone {

namespace {

void napi_ok_or_throw(napi_status status, const char* what) {
  if (status != napi_ok) throw std::runtime_error(std::string("native calls: ") + what + " failed");
}

// What one environment (the main thread's, or a worker thread's) has in the core: the thread-safe
// function that carries answers to its JavaScript thread, the calls it has not had answered, and the
// calls still on a job thread. Lives as long as that thread-safe function: Node destroys it when
// the environment ends, after the cleanup hook below has waited for the job threads.
class EnvCalls {
 public:
  // The environment's, made on its first call. JavaScript thread.
  static EnvCalls& of(napi_env env) {
    const std::lock_guard<std::mutex> lock(registry_mutex());
    auto& entry = registry()[env];
    if (entry == nullptr) entry = new EnvCalls(env);
    return *entry;
  }

  // JavaScript thread: a call goes to a job thread. While any answer is due, the event loop stays
  // alive for it (as for libuv's work requests); otherwise the answers' channel holds nothing open.
  void queued() {
    if (due_++ == 0) napi_ref_threadsafe_function(env_, answers_);
    const std::lock_guard<std::mutex> lock(mutex_);
    ++on_threads_;
  }
  // JavaScript thread: a call has answered.
  void answered() {
    if (--due_ == 0) napi_unref_threadsafe_function(env_, answers_);
  }
  // Job thread: queues the call's answer; false once the environment is ending.
  bool send(NativeCall* call) { return napi_call_threadsafe_function(answers_, call, napi_tsfn_nonblocking) == napi_ok; }
  // Job thread: the call is done with its thread (and with this object). Notifies under the lock:
  // once the cleanup hook can go on, this thread no longer touches the object.
  void left_thread() {
    const std::lock_guard<std::mutex> lock(mutex_);
    --on_threads_;
    left_.notify_all();
  }

  static void call_js(napi_env env, napi_value, void* context, void* data);

 private:
  explicit EnvCalls(napi_env env) : env_(env) {
    napi_value name;
    napi_ok_or_throw(napi_create_string_utf8(env, "bgone native call", NAPI_AUTO_LENGTH, &name), "napi_create_string_utf8");
    napi_ok_or_throw(napi_create_threadsafe_function(env, nullptr, nullptr, name, 0, 1, this, destroyed, this, call_js, &answers_),
                     "napi_create_threadsafe_function");
    napi_unref_threadsafe_function(env, answers_);
    // Registered after the thread-safe function, so it runs before Node closes that (cleanup hooks
    // run last registered, first run).
    napi_ok_or_throw(napi_add_env_cleanup_hook(env, environment_ends, this), "napi_add_env_cleanup_hook");
  }

  // The environment ends: its calls still on job threads read its buffers, which live until the
  // isolate goes, so it waits for them. Their answers are dropped (call_js without an environment).
  static void environment_ends(void* self) {
    auto* calls = static_cast<EnvCalls*>(self);
    {
      const std::lock_guard<std::mutex> lock(registry_mutex());
      registry().erase(calls->env_);
    }
    std::unique_lock<std::mutex> lock(calls->mutex_);
    calls->left_.wait(lock, [calls] { return calls->on_threads_ == 0; });
  }
  static void destroyed(napi_env, void* self, void*) { delete static_cast<EnvCalls*>(self); }

  static std::mutex& registry_mutex() {
    static auto* mutex = new std::mutex();
    return *mutex;
  }
  static std::map<napi_env, EnvCalls*>& registry() {
    static auto* map = new std::map<napi_env, EnvCalls*>();
    return *map;
  }

  napi_env env_;
  napi_threadsafe_function answers_ = nullptr;
  int due_ = 0;  // JavaScript thread only
  std::mutex mutex_;
  std::condition_variable left_;
  int on_threads_ = 0;
};

// The job threads: one more is started whenever a call is queued with none idle, and each is kept.
// The calls inside at once are bounded in TypeScript (src/lib/limiter.ts), so are the threads.
class JobThreads {
 public:
  void run(NativeCall* call, EnvCalls* calls) {
    std::unique_lock<std::mutex> lock(mutex_);
    queue_.emplace_back(call, calls);
    if (idle_ >= static_cast<int>(queue_.size())) {
      lock.unlock();
      wake_.notify_one();
      return;
    }
    std::thread([this] { serve(); }).detach();
  }

 private:
  void serve();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<NativeCall*, EnvCalls*>> queue_;
  int idle_ = 0;  // threads waiting for a call
};

// Never destroyed: its threads wait on it until the process exits.
JobThreads& job_threads() {
  static auto* instance = new JobThreads();
  return *instance;
}

}  // namespace

// The parts of a call that run outside it: on its job thread, and its answer.
struct CallRunner {
  static void execute(NativeCall* call) {
    try {
      call->Execute();
    } catch (const std::bad_alloc&) {
      call->SetError("out of memory");
    } catch (const std::exception& e) {
      call->SetError(e.what());
    } catch (...) {
      call->SetError("unknown native exception");
    }
  }
  static void answer(napi_env env, NativeCall* call) {
    Napi::Env e(env);
    const Napi::HandleScope scope(e);
    if (call->failed_) {
      call->OnError(e, call->error_);
    } else {
      call->OnOK(e);
    }
  }
  static void abandon(NativeCall* call) {
    call->Abandon();
    delete call;
  }
};

void JobThreads::serve() {
  for (;;) {
    std::pair<NativeCall*, EnvCalls*> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++idle_;
      wake_.wait(lock, [this] { return !queue_.empty(); });
      --idle_;
      next = queue_.front();
      queue_.pop_front();
    }
    auto [call, calls] = next;
    CallRunner::execute(call);
    if (!calls->send(call)) CallRunner::abandon(call);
    calls->left_thread();
  }
}

void EnvCalls::call_js(napi_env env, napi_value, void* context, void* data) {
  auto* call = static_cast<NativeCall*>(data);
  if (env == nullptr) {  // the environment is being torn down: no answer
    CallRunner::abandon(call);
    return;
  }
  static_cast<EnvCalls*>(context)->answered();
  CallRunner::answer(env, call);
  delete call;
}

void NativeCall::Queue() {
  EnvCalls& calls = EnvCalls::of(env_);
  calls.queued();
  job_threads().run(this, &calls);
}

}  // namespace bgone
