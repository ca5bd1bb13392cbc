// The jobs in progress in the native core, and what the process does once there are none: a job
// marks itself for as long as it runs (JobInProgress, addon.cc); the model's runs ask how many there
// are (model.cc: a job alone gets every core), and about a second after the last one ends the
// memory kept warm for the next job goes back to the OS (buffers.h).
#pragma once

namespace bgone {

class JobInProgress {
 public:
  JobInProgress();
  ~JobInProgress();
  JobInProgress(const JobInProgress&) = delete;
  JobInProgress& operator=(const JobInProgress&) = delete;
};

int jobs_in_progress();

// Gives the memory kept warm back to the OS now, as the idle thread does a second after the last job.
void release_memory_now();

}  // namespace bgone
