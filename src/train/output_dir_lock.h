// The lock of an --output-dir (issue 29, item 7): two runs saving into one folder raced on its
// checkpoint-<N>.tmp folders and the loser ended with "internal error ... filesystem error". A
// run that saves holds DIR/.snug-lock for its lifetime: flock(2) on the file, released by the
// kernel when the process ends however it ends (kill -9 included, so a lock is never stale), and
// the file names the holder (job, pid, host, start time) for the message of a run refused.
//
// The ranks of one job share the lock: a job is named by SNUG_JOB_ID in the environment (every
// rank of a launch sets the same; without it each process is its own job). The first process
// takes the lock exclusively, writes its record and turns the lock shared; a process of the same
// job then takes it shared as well, one of another job cannot take it and is refused (exit 2,
// OutputDirInUseError), naming the holder.
#pragma once

#include <string>

#include "train/output_dir.h"

namespace snug {

class OutputDirLock {
 public:
  // Creates `dir` if needed and takes its lock, or throws OutputDirInUseError naming the holder.
  explicit OutputDirLock(const std::string& dir);
  ~OutputDirLock();
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;

  // The job this process belongs to: SNUG_JOB_ID, else "pid <pid> on <host>".
  static std::string job();

 private:
  int fd_ = -1;
};

// The lock file's name inside an output dir (prepare_output_dir leaves it alone).
inline constexpr const char* kOutputDirLockFile = ".snug-lock";

}  // namespace snug
