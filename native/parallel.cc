#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
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

void parallel_for(int count, const std::function<void(int)>& fn) {
  const int workers = std::min(count, free_cores());
  if (workers <= 1) {
    for (int i = 0; i < count; ++i) fn(i);
    return;
  }
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int i; (i = next.fetch_add(1)) < count;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
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

void parallel_bands(int height, const std::function<void(int, int)>& fn) {
  in_blocks(height, std::max(1, std::min(height, free_cores())), fn);
}

}  // namespace bgone
