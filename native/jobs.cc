#include "jobs.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "buffers.h"

namespace bgone {
namespace {

// How long memory stays warm after the last job: longer than the gap between the requests of a
// client that sends one after another (an upload and a response apart), short enough that an idle
// service is back to its idle RSS within a second or two.
constexpr auto kKeepWarm = std::chrono::milliseconds(1000);

// Counts the jobs; a thread of its own gives memory back kKeepWarm after the last one ends.
class Jobs {
 public:
  void started() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_started_) {
      std::thread([this] { idle_loop(); }).detach();
      thread_started_ = true;
    }
    ++count_;
  }
  void ended() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --count_;
      last_end_ = std::chrono::steady_clock::now();
      pending_ = true;
    }
    wake_.notify_one();
  }
  int count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }

 private:
  void idle_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return pending_ && count_ == 0; });
      if (wake_.wait_until(lock, last_end_ + kKeepWarm, [this] { return count_ > 0; })) continue;  // busy again
      if (std::chrono::steady_clock::now() < last_end_ + kKeepWarm) continue;                      // another job ended meanwhile
      pending_ = false;
      lock.unlock();
      release_memory_now();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  bool thread_started_ = false, pending_ = false;
  int count_ = 0;
  std::chrono::steady_clock::time_point last_end_;
};

// Never destroyed: its thread may still wait on it while the process exits.
Jobs& jobs() {
  static Jobs* instance = new Jobs();
  return *instance;
}

}  // namespace

void release_memory_now() {
  release_cached_buffers();
#ifdef __GLIBC__
  // glibc keeps freed pages in per-thread arenas for reuse: hand them back too.
  malloc_trim(0);
#endif
}

JobInProgress::JobInProgress() { jobs().started(); }
JobInProgress::~JobInProgress() { jobs().ended(); }
int jobs_in_progress() { return jobs().count(); }

}  // namespace bgone
