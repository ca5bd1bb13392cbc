// Deadlines of the model runs in progress. A thread of its own tells ONNX Runtime to stop a run that
// passes its limit (RunOptionsSetTerminate: the run ends at its next node with a failed status), and
// stop_all_runs stops every run at once, and every later one as it starts (the process is ending).
#pragma once
#include <chrono>
#include <cstdint>

struct OrtRunOptions;

namespace bgone {

// Watches one run for as long as it lives; the run's options must outlive it.
class RunDeadline {
 public:
  enum class Outcome { Running, PassedLimit, Stopped };
  // limit_ms 0: no limit (stop_all_runs still stops it).
  RunDeadline(OrtRunOptions* options, int64_t limit_ms);
  ~RunDeadline();
  RunDeadline(const RunDeadline&) = delete;
  RunDeadline& operator=(const RunDeadline&) = delete;
  // Why the run was told to stop, if it was.
  Outcome outcome() const;

  struct Entry;

 private:
  Entry* entry_;
};

// Stops every run in progress and every run that starts later.
void stop_all_runs();
// Model runs in progress now.
int runs_in_progress();

}  // namespace bgone
