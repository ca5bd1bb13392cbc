#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace bgone {

namespace {
std::atomic<int> g_cores_in_use{0};
}

CoresInUse::CoresInUse(int cores) : cores_(cores) { g_cores_in_use += cores_; }
CoresInUse::~CoresInUse() { g_cores_in_use -= cores_; }

int free_cores() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores - g_cores_in_use.load());
}

namespace {

// One loop's shared state. The caller owns the loop's function; a helper may run items only while
// the loop is open, and the caller closes it (and waits for the helpers inside) before returning.
struct Loop {
  const std::function<void(int)>* fn;
  int count;
  std::atomic<int> next{0};
  std::mutex mutex;
  std::condition_variable done;
  bool open = true;
  int inside = 0;  // helpers running items now
  std::exception_ptr error;

  // Runs items until none is left; the first exception is kept for the caller.
  void work() {
    for (int i; (i = next.fetch_add(1)) < count;) {
      try {
        (*fn)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
};

// Helper threads, one per core but the caller's, started once and kept. A thread made per loop
// cost about 0.1 ms of clone, stack faults and exit each time; a job runs about a dozen loops.
class Helpers {
 public:
  Helpers() {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int t = 1; t < cores; ++t) std::thread([this] { serve(); }).detach();
  }

  // Offers the loop to up to `helpers` idle threads (a busy one is not waited for: the caller and
  // whoever is free share the items).
  void offer(const std::shared_ptr<Loop>& loop, int helpers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int h = 0; h < helpers; ++h) queue_.push_back(loop);
    }
    for (int h = 0; h < helpers; ++h) wake_.notify_one();
  }

 private:
  void serve() {
    for (;;) {
      std::shared_ptr<Loop> loop;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        loop = std::move(queue_.front());
        queue_.pop_front();
      }
      {
        std::lock_guard<std::mutex> lock(loop->mutex);
        if (!loop->open) continue;  // the caller finished the items alone
        ++loop->inside;
      }
      loop->work();
      std::lock_guard<std::mutex> lock(loop->mutex);
      if (--loop->inside == 0) loop->done.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Loop>> queue_;
};

// Never destroyed: its threads wait on it until the process exits.
Helpers& helpers() {
  static Helpers* instance = new Helpers();
  return *instance;
}

}  // namespace

void parallel_for(int count, const std::function<void(int)>& fn) {
  const int workers = std::min(count, free_cores());
  if (workers <= 1) {
    for (int i = 0; i < count; ++i) fn(i);
    return;
  }
  auto loop = std::make_shared<Loop>();
  loop->fn = &fn;
  loop->count = count;
  helpers().offer(loop, workers - 1);
  loop->work();
  std::unique_lock<std::mutex> lock(loop->mutex);
  loop->open = false;
  loop->done.wait(lock, [&] { return loop->inside == 0; });
  if (loop->error) std::rethrow_exception(loop->error);
}

namespace {
void in_blocks(int height, int blocks, const std::function<void(int, int)>& fn) {
  parallel_for(blocks, [&](int b) {
    const int first = static_cast<int>(static_cast<long long>(height) * b / blocks);
    const int end = static_cast<int>(static_cast<long long>(height) * (b + 1) / blocks);
    if (first < end) fn(first, end);
  });
}
}  // namespace

void parallel_rows(int height, const std::function<void(int, int)>& fn) { in_blocks(height, std::max(1, std::min(height, 64)), fn); }

void parallel_rows(int height, int group, const std::function<void(int, int)>& fn) {
  const int g = std::max(1, group), groups = (height + g - 1) / g;
  parallel_rows(groups, [&](int first, int end) { fn(first * g, std::min(height, end * g)); });
}

void parallel_bands(int height, const std::function<void(int, int)>& fn) {
  in_blocks(height, std::max(1, std::min(height, free_cores())), fn);
}

}  // namespace bgone
