#include "buffers.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace bgone {
namespace {

constexpr size_t kPage = size_t{4} << 10;
constexpr size_t kHugePage = size_t{2} << 20;
// From this size a block gets a mapping of its own (rounded up to whole huge pages: at most 1.5 MiB
// more for the smallest, which still beats faulting in 128 pages of 4 KiB).
constexpr size_t kMappedFrom = size_t{512} << 10;
// Every block starts with this header (the size of the alignment we promise): what free_buffer needs
// to give the block back.
constexpr size_t kHeader = 64;
// The blocks mapped (in use and cached) stay within the most in use at once since the last release
// plus this share of it (kSlackQuarters / 4). A job's phases ask for different sizes (the decode and
// the tensor, then ONNX Runtime's run, then the matting planes), so their blocks add up to more than
// the most in use at once (at 12 MP 362 MB against 210). With less slack a miss gives back a cached
// block the next phase needs, and the job maps fresh pages the kernel must zero; three quarters
// leave no miss at 2 or 12 MP. test/lib/native-memory.test.ts checks the same bound (BOUND).
constexpr size_t kSlackQuarters = 3;

struct Header {
  void* base;           // what mmap or malloc returned; for a block of an arena, the block itself
  size_t mapped;        // bytes mapped at base; 0 for a malloc'ed block or one of an arena
  LastingArena* arena;  // the arena it was taken from, if any
};
static_assert(sizeof(Header) <= kHeader, "the header must fit before the aligned data");

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A mapping of `bytes` (a multiple of kPage) starting on a huge-page boundary: mmap gives only 4 KiB
// alignment, so map one huge page more and unmap what lies before and after the aligned range.
void* map_aligned(size_t bytes) {
  const size_t over = bytes + kHugePage;
  void* raw = mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(start, kHugePage);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + over, aligned_end = aligned + bytes;
  if (end > aligned_end) munmap(reinterpret_cast<void*>(aligned_end), end - aligned_end);
  void* block = reinterpret_cast<void*>(aligned);
  // Advice only: where transparent huge pages are off or unavailable the block still works.
  madvise(block, bytes, MADV_HUGEPAGE);
  return block;
}

// The mapped blocks not in use, by size. A request takes the smallest that fits, if it is at most
// twice the request (a larger one would hold resident pages the request does not need).
class BlockCache {
 public:
  // `bytes` becomes the size of the block returned (a cached block may be larger).
  void* take(size_t& bytes) {
    std::vector<std::pair<size_t, void*>> evicted;
    void* block = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= 2 * bytes) {
        block = it->second;
        bytes = it->first;
        cached_ -= bytes;
        free_.erase(it);
      } else {
        // A miss maps a new block: first give back cached blocks (the largest first) until the
        // mapped total stays within the bound, or the cache is empty.
        const size_t ceiling = std::max(peak_, in_use_ + bytes) + peak_ / 4 * kSlackQuarters;
        while (!free_.empty() && in_use_ + cached_ + bytes > ceiling) {
          auto largest = std::prev(free_.end());
          evicted.emplace_back(*largest);
          cached_ -= largest->first;
          free_.erase(largest);
        }
      }
      in_use_ += bytes;
      peak_ = std::max(peak_, in_use_);
    }
    for (const auto& [size, base] : evicted) munmap(base, size);
    if (block != nullptr) return block;
    block = map_aligned(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    if (block == nullptr) {
      in_use_ -= bytes;
    } else {
      ++maps_;
    }
    return block;
  }

  void give(void* base, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_ -= bytes;
    cached_ += bytes;
    free_.emplace(bytes, base);
  }

  void release() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(free_);
      cached_ = 0;
      peak_ = in_use_;
    }
    for (const auto& [size, base] : blocks) munmap(base, size);
  }

  BufferStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {in_use_, cached_, peak_, maps_};
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  size_t in_use_ = 0, cached_ = 0, peak_ = 0, maps_ = 0;
};

// Never destroyed: blocks may still be freed (and the idle thread run) while the process exits.
BlockCache& cache() {
  static BlockCache* instance = new BlockCache();
  return *instance;
}

void* with_header(Header header) {
  if (header.base == nullptr) throw std::bad_alloc();
  *static_cast<Header*>(header.base) = header;
  return static_cast<uint8_t*>(header.base) + kHeader;
}

// The header in front of a block from alloc_* (with_header wrote it).
Header header_of(void* p) { return *reinterpret_cast<const Header*>(static_cast<uint8_t*>(p) - kHeader); }

void* from_malloc(size_t bytes) { return std::aligned_alloc(kHeader, round_up(kHeader + bytes, kHeader)); }

// From this size an output gets a mapping of its own.
constexpr size_t kOutputMappedFrom = size_t{256} << 10;

}  // namespace

void* alloc_lasting(size_t bytes) {
  if (bytes > (static_cast<size_t>(-1) >> 2)) throw std::bad_alloc();
  return with_header({from_malloc(bytes), 0, nullptr});
}

void* alloc_buffer(size_t bytes) {
  if (bytes < kMappedFrom) return alloc_lasting(bytes);
  if (bytes > (static_cast<size_t>(-1) >> 2)) throw std::bad_alloc();
  size_t mapped = round_up(kHeader + bytes, kHugePage);
  void* base = cache().take(mapped);
  return with_header({base, mapped, nullptr});
}

void free_buffer(void* p) noexcept {
  if (p == nullptr) return;
  const Header header = header_of(p);
  if (header.arena != nullptr) {
    header.arena->release();
  } else if (header.mapped != 0) {
    cache().give(header.base, header.mapped);
  } else {
    std::free(header.base);
  }
}

void* alloc_output(size_t bytes) {
  if (bytes < kOutputMappedFrom) return alloc_lasting(bytes);
  if (bytes > (static_cast<size_t>(-1) >> 2)) throw std::bad_alloc();
  const size_t mapped = round_up(kHeader + bytes, kPage);
  // Filled in by the kernel as it is mapped, in 4 KiB pages: see buffers.h for why not huge ones.
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  return with_header({base, mapped, nullptr});
}

void free_output(void* p) noexcept {
  if (p == nullptr) return;
  const Header header = header_of(p);
  if (header.mapped != 0) {
    munmap(header.base, header.mapped);
  } else {
    std::free(header.base);
  }
}

// Mappings of this size hold the small blocks; a block too large for one gets a mapping of its own.
constexpr size_t kArenaChunk = size_t{16} << 20;
// What the arenas alive have mapped, for buffer_stats.
std::atomic<size_t> g_lasting_mapped{0};

void* LastingArena::alloc(size_t bytes) {
  if (bytes > (static_cast<size_t>(-1) >> 2)) throw std::bad_alloc();
  const size_t need = round_up(kHeader + bytes, kHeader);
  std::lock_guard<std::mutex> lock(mutex_);
  if (chunks_.empty() || chunks_.back().size - used_ < need) {
    const size_t size = std::max(kArenaChunk, round_up(need, kHugePage));
    void* base = map_aligned(size);
    if (base == nullptr) throw std::bad_alloc();
    chunks_.push_back({static_cast<uint8_t*>(base), size});
    g_lasting_mapped += size;
    used_ = 0;
  }
  uint8_t* block = chunks_.back().base + used_;
  used_ += need;
  ++live_;
  return with_header({block, 0, this});
}

size_t LastingArena::bytes() {
  const std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const Chunk& c : chunks_) total += c.size;
  return total;
}

void LastingArena::release() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  --live_;
}

LastingArena::~LastingArena() {
  // A block still in use (the session outlived its arena: a bug) keeps its memory rather than
  // pointing into memory given back.
  if (live_ != 0) return;
  for (const Chunk& chunk : chunks_) {
    munmap(chunk.base, chunk.size);
    g_lasting_mapped -= chunk.size;
  }
}

BufferStats buffer_stats() {
  BufferStats stats = cache().stats();
  stats.lasting = g_lasting_mapped;
  return stats;
}
void release_cached_buffers() { cache().release(); }

}  // namespace bgone
