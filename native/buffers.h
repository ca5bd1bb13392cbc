// Large buffers for every big allocation of a job: our planes and pixels, the decoded image, and
// ONNX Runtime's tensors (model.cc registers alloc_buffer and free_buffer as its CPU allocator).
//
// Why: a job touches a few hundred MB of memory, and memory goes back to the OS once the process is
// idle. On the virtual machines we run on, the first touch of a 4 KiB page costs about 11 us (a
// trap to the hypervisor per page), so faulting a job's memory in took about as long as the
// inference itself. So:
// - blocks from 512 KiB up are mapped on their own, 2 MiB-aligned and marked MADV_HUGEPAGE: a
//   transparent huge page is faulted in one trap. Where the kernel has
//   transparent huge pages off, the advice is ignored and the pages are ordinary ones;
// - a freed block is kept for the next block of a size it fits (back-to-back jobs ask for the same
//   sizes), so busy jobs reuse warm memory, and it goes back to the OS once no job has run for a
//   second (jobs.h). The blocks mapped never add up to more than 1.75 times the most that
//   jobs had in use at once since the last release (a job's phases ask for different sizes).
// Smaller blocks come from malloc. docs/development.md, "Large blocks on huge pages, kept warm", has the measurements.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace bgone {

// 64-byte aligned, never nullptr (throws std::bad_alloc). Release with free_buffer.
void* alloc_buffer(size_t bytes);
// The same, always from malloc and never cached: for small memory that outlives a job.
void* alloc_lasting(size_t bytes);
void free_buffer(void* p) noexcept;

// Memory that lives as long as a model's CPU session: ONNX Runtime's weights, prepacked for its
// kernels when the session is created (41 MB for the default model). Packed one after the other
// into 2 MiB-aligned mappings marked MADV_HUGEPAGE, so the kernels read them through a few huge
// pages instead of thousands of small ones (from malloc, the same runs were a few per cent
// slower). A freed block is not reused: the memory comes back when the arena is destroyed, after
// its session; no model of the manifest frees one earlier.
class LastingArena {
 public:
  LastingArena() = default;
  ~LastingArena();
  LastingArena(const LastingArena&) = delete;
  LastingArena& operator=(const LastingArena&) = delete;

  // 64-byte aligned, never nullptr (throws std::bad_alloc). Release with free_buffer.
  void* alloc(size_t bytes);
  // The bytes of the chunks it holds.
  size_t bytes();

 private:
  friend void free_buffer(void* p) noexcept;
  void release() noexcept;

  struct Chunk {
    uint8_t* base;
    size_t size;
  };
  std::mutex mutex_;
  std::vector<Chunk> chunks_;
  size_t used_ = 0;  // bytes taken from the last chunk
  size_t live_ = 0;  // blocks not yet released
};

// Memory for bytes that become a JavaScript Buffer (an encoded PNG): JavaScript decides when it is
// freed, so it never comes from the block cache (an output held there is a block the next job maps
// afresh: tried, one fresh block per 12 MP job). From 256 KiB it is a mapping of its own, filled in
// by the kernel as it is mapped (MAP_POPULATE), in 4 KiB pages; its resident size stays the
// output's own. Not on a huge page: inside the running core a fresh huge page took longer to fill
// in than the small pages (docs/development.md, "The PNG"); and populated, each page's first write
// traps in about half the time it would otherwise.
// Release with free_output.
void* alloc_output(size_t bytes);
void free_output(void* p) noexcept;

struct BufferStats {
  size_t in_use = 0;   // bytes of mapped blocks in use
  size_t cached = 0;   // bytes of mapped blocks kept for reuse
  size_t peak = 0;     // the most in use at once since the cache was last released
  size_t mapped = 0;   // blocks mapped so far (a warm job maps none)
  size_t lasting = 0;  // bytes mapped by the arenas of the sessions alive (LastingArena)
};
BufferStats buffer_stats();
// Gives every cached block back now (jobs.cc does, once the core is idle).
void release_cached_buffers();

// std::allocator over alloc_buffer, for std::vector. resize(n) and vector(n) leave the elements
// uninitialised (default-initialised): every buffer of a job is written whole before it is read,
// and zeroing warm memory first costs a pass over it. A buffer that must start at zero says so
// (vector(n, 0.f), assign(n, 0)).
template <class T>
struct BufferAllocator {
  using value_type = T;
  BufferAllocator() noexcept = default;
  template <class U>
  BufferAllocator(const BufferAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / 2 / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(alloc_buffer(n * sizeof(T)));
  }
  void deallocate(T* p, size_t) noexcept { free_buffer(p); }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const BufferAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const BufferAllocator<U>&) const noexcept {
    return false;
  }
};

template <class T>
using Buffer = std::vector<T, BufferAllocator<T>>;

}  // namespace bgone
