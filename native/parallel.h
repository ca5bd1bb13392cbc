// One budget of threads for the process, shared by ONNX Runtime, the matting and the PNG writer.
#pragma once
#include <functional>

namespace bgone {

// One budget of threads for the process: while a model runs on the CPU, its threads hold the cores
// (CoresInUse, model.cc), and another job's parallel loops below use only the cores left (at least
// one, its own thread), instead of adding as many threads again. On two cores a second pair of
// threads beside the model's made both slower: the model's steps wait for their slowest thread.
class CoresInUse {
 public:
  explicit CoresInUse(int cores);
  ~CoresInUse();
  CoresInUse(const CoresInUse&) = delete;
  CoresInUse& operator=(const CoresInUse&) = delete;

 private:
  int cores_;
};

// The cores no model run holds now (at least one: the caller's own thread).
int free_cores();
// Runs fn(0..count-1) on up to one thread per free core (above); rethrows the first exception.
void parallel_for(int count, const std::function<void(int)>& fn);
// Splits rows [0, height) into contiguous blocks run in parallel: fn(first_row, end_row).
void parallel_rows(int height, const std::function<void(int, int)>& fn);
// The same, never splitting a group of `group` rows (each block starts at a multiple of it).
void parallel_rows(int height, int group, const std::function<void(int, int)>& fn);
// Splits rows [0, height) into one contiguous band per free core: fn(first_row, end_row). For
// work whose bands each pay a start-up (box_mean.h's streamed box means read r rows around them).
void parallel_bands(int height, const std::function<void(int, int)>& fn);

}  // namespace bgone
