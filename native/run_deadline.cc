#include "run_deadline.h"

#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include "onnxruntime_c_api.h"
#include "ort.h"

namespace bgone {

struct RunDeadline::Entry {
  OrtRunOptions* options;
  bool limited;
  std::chrono::steady_clock::time_point deadline;
  Outcome outcome = Outcome::Running;
};

namespace {

// The runs in progress, and the thread that stops those past their deadline. Never destroyed: its
// thread may still wait on it while the process exits.
class Watchdog {
 public:
  RunDeadline::Entry* add(OrtRunOptions* options, int64_t limit_ms) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_started_) {
      std::thread([this] { loop(); }).detach();
      thread_started_ = true;
    }
    entries_.push_back({options, limit_ms > 0, std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms)});
    RunDeadline::Entry* entry = &entries_.back();
    if (stopping_) terminate(*entry, RunDeadline::Outcome::Stopped);
    wake_.notify_one();
    return entry;
  }
  void remove(RunDeadline::Entry* entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.remove_if([entry](const RunDeadline::Entry& e) { return &e == entry; });
  }
  RunDeadline::Outcome outcome(const RunDeadline::Entry* entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    return entry->outcome;
  }
  void stop_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& e : entries_) terminate(e, RunDeadline::Outcome::Stopped);
  }
  int count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(entries_.size());
  }

 private:
  // Under the lock. The flag is an atomic ONNX Runtime reads between nodes: safe beside the run.
  void terminate(RunDeadline::Entry& e, RunDeadline::Outcome why) {
    if (e.outcome != RunDeadline::Outcome::Running) return;
    e.outcome = why;
    OrtStatus* status = ort_api()->RunOptionsSetTerminate(e.options);
    if (status != nullptr) ort_api()->ReleaseStatus(status);
  }
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      bool any = false;
      std::chrono::steady_clock::time_point next;
      for (auto& e : entries_) {
        if (!e.limited || e.outcome != RunDeadline::Outcome::Running) continue;
        if (e.deadline <= now) {
          terminate(e, RunDeadline::Outcome::PassedLimit);
          continue;
        }
        if (!any || e.deadline < next) next = e.deadline;
        any = true;
      }
      if (any)
        wake_.wait_until(lock, next);
      else
        wake_.wait(lock);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::list<RunDeadline::Entry> entries_;  // stable addresses
  bool thread_started_ = false, stopping_ = false;
};

Watchdog& watchdog() {
  static Watchdog* instance = new Watchdog();
  return *instance;
}

}  // namespace

RunDeadline::RunDeadline(OrtRunOptions* options, int64_t limit_ms) : entry_(watchdog().add(options, limit_ms)) {}
RunDeadline::~RunDeadline() { watchdog().remove(entry_); }
RunDeadline::Outcome RunDeadline::outcome() const { return watchdog().outcome(entry_); }

void stop_all_runs() { watchdog().stop_all(); }
int runs_in_progress() { return watchdog().count(); }

}  // namespace bgone
