// One run per --output-dir (issue 15): a run that saves checkpoints into a folder holding
// another run's checkpoints would overwrite some of them and leave a mix (checkpoint-3 of the new
// run beside checkpoint-6 of the old, which --resume-from DIR would then pick). So before step 1:
//   - a new run (no --resume-from) into a folder with complete checkpoint-<N> folders stops with
//     OutputDirInUseError (the CLI's bad-usage exit, 2), unless overwrite_output_dir
//     (--overwrite-output-dir, transformers 4's name), which removes every folder snug wrote
//     there first (checkpoint-<N> with its trainer_state.json, and the .tmp/.replaced/.deleting
//     forms; a user's checkpoint-notes/ stays), a resume keeping those of its own run;
//   - a resume is let through when every checkpoint there is of the same run (the record in its
//     trainer_state.json, train/run_record.h, matches the resumed run's).
// And after each save, --save-total-limit N removes the oldest checkpoints beyond the newest N
// (by step; never the one just saved), as the Trainer's rotate_checkpoints. Each is renamed to
// checkpoint-<N>.deleting before it is removed, so that a kill -9 in the middle leaves it whole
// or recognisably gone, never a half-removed checkpoint listed as complete.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace snug {

class OutputDirInUseError : public Error {
 public:
  using Error::Error;
};

// See above. `record` is this run's run record; returns the checkpoint folders removed (only
// with `overwrite`).
std::vector<std::string> prepare_output_dir(const std::string& dir, const nlohmann::json& record,
                                            bool resuming, bool overwrite);

// Removes the oldest checkpoint-<N> folders of `dir` (by N) so that `limit` remain, never
// `keep` (the one just saved) nor `best` (--load-best-model-at-end's best so far, which counts
// towards the limit; with limit 1 both stay, as in the Trainer); limit 0 keeps all. Returns the
// folders removed.
std::vector<std::string> rotate_checkpoints(const std::string& dir, int64_t limit,
                                            const std::string& keep, const std::string& best = "");

}  // namespace snug
