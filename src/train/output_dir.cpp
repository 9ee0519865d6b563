#include "train/output_dir.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "train/checkpoint.h"
#include "train/run_record.h"
#include "train/trainer_state.h"

namespace snug {

namespace fs = std::filesystem;

namespace {

// The names snug gives the folders it writes: checkpoint-<N> (with trainer_state.json, its
// manifest, once complete), checkpoint-<N>.replaced (set aside while a save replaces it),
// checkpoint-<N>.tmp (a save under way) and checkpoint-<N>.deleting (being removed).
constexpr const char* kTransientSuffixes[] = {".deleting", ".tmp"};
constexpr const char* kDeletingSuffix = ".deleting";

bool name_ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Whether snug wrote the folder `e`: a name it parses, with its manifest where a complete one
// has it. A user's checkpoint-notes/ (or a checkpoint-7 without trainer_state.json) is not.
bool written_by_snug(const fs::directory_entry& e) {
  std::error_code ec;
  if (!e.is_directory(ec)) return false;
  std::string name = e.path().filename().string();
  bool transient = false;
  for (const char* suffix : kTransientSuffixes)  // ".deleting" after ".tmp": "X.tmp.deleting"
    if (name_ends_with(name, suffix)) {
      name.resize(name.size() - std::strlen(suffix));
      transient = true;
    }
  if (name_ends_with(name, ".replaced")) name.resize(name.size() - std::strlen(".replaced"));
  int64_t step = 0;
  return parse_checkpoint_name(name, &step) &&
         (transient || fs::exists(e.path() / kTrainerStateFile, ec));
}

// Test hook (tests/cli/hostile_round_two_cli_test.cpp): with SNUG_TEST_CRASH_DURING_ROTATE set,
// the process removes the manifest-less half of the folder being rotated out and kills itself
// (SIGKILL), as a kill -9 in the middle of the removal would leave it.
void crash_while_rotating_for_tests(const fs::path& retiring) {
  if (std::getenv("SNUG_TEST_CRASH_DURING_ROTATE") == nullptr) return;
  std::error_code ec;
  fs::remove(retiring / kCheckpointModelFile, ec);
  std::raise(SIGKILL);
}

// Removes a checkpoint so that it is whole or recognisably gone at every moment: renamed to
// checkpoint-<N>.deleting first (one atomic step; list_checkpoints no longer sees it), then
// removed. A removal killed half-way leaves a .deleting folder, which the next rotation (or
// --overwrite-output-dir) finishes.
void retire(const fs::path& path, const char* why) {
  std::error_code ec;
  const fs::path deleting = path.string() + kDeletingSuffix;
  fs::remove_all(deleting, ec);
  fs::rename(path, deleting, ec);
  SNUG_CHECK(!ec, path.string(), ": cannot remove (", why, "): ", ec.message());
  crash_while_rotating_for_tests(deleting);
  fs::remove_all(deleting, ec);
  SNUG_CHECK(!ec, deleting.string(), ": cannot remove (", why, "): ", ec.message());
}

// Finishes the removals a killed run left (checkpoint-<N>.deleting).
void finish_removals(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> left;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (name_ends_with(e.path().filename().string(), kDeletingSuffix) && written_by_snug(e))
      left.push_back(e.path());
  for (const fs::path& p : left) fs::remove_all(p, ec);
}

}  // namespace

std::vector<std::string> prepare_output_dir(const std::string& dir, const nlohmann::json& record,
                                            bool resuming, bool overwrite) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  // A complete checkpoint recording this run (only a resume continues a run).
  auto this_runs = [&](const fs::path& path) {
    if (!resuming || !fs::exists(path / kTrainerStateFile, ec)) return false;
    try {
      return same_run(read_trainer_state(path.string()).run, record);
    } catch (const std::exception&) {
      return false;  // unreadable: not recognisably this run's
    }
  };
  std::vector<std::string> removed;
  if (overwrite) {
    // Every other folder snug wrote, complete or not: none may be mistaken for this run's. A
    // resume keeps its own run's checkpoints (the one it resumes from among them). Only what
    // snug wrote: a user's checkpoint-notes/ stays.
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (!written_by_snug(e) || this_runs(e.path())) continue;
      removed.push_back(e.path().string());
    }
    std::sort(removed.begin(), removed.end());
    for (const std::string& path : removed) {
      fs::remove_all(path, ec);
      SNUG_CHECK(!ec, path, ": cannot remove (--overwrite-output-dir): ", ec.message());
    }
    return removed;
  }
  for (const auto& [step, path] : list_checkpoints(dir)) {
    if (this_runs(path)) continue;
    throw OutputDirInUseError(detail::concat(
        "--output-dir ", dir, " holds ", fs::path(path).filename().string(),
        resuming ? " of another run" : " of an earlier run",
        "; this run would overwrite its checkpoints and leave a mix of both. Resume that run "
        "with --resume-from ",
        dir,
        ", choose another --output-dir, or pass --overwrite-output-dir to remove its "
        "checkpoints"));
  }
  return removed;
}

std::vector<std::string> rotate_checkpoints(const std::string& dir, int64_t limit,
                                            const std::string& keep, const std::string& best) {
  std::vector<std::string> removed;
  if (limit <= 0) return removed;
  finish_removals(dir);
  std::vector<std::pair<int64_t, std::string>> all = list_checkpoints(dir);
  const fs::path kept = fs::weakly_canonical(keep);
  const fs::path best_path = best.empty() ? fs::path() : fs::weakly_canonical(best);
  const bool other_best = !best.empty() && best_path != kept;
  std::vector<std::string> others;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {  // newest first
    const fs::path p = fs::weakly_canonical(it->second);
    if (p != kept && !(other_best && p == best_path)) others.push_back(it->second);
  }
  // The one just saved, the best, and the newest of the others up to the limit.
  const int64_t more = std::max<int64_t>(0, limit - 1 - (other_best ? 1 : 0));
  for (size_t i = static_cast<size_t>(more); i < others.size(); ++i) {
    retire(others[i], "--save-total-limit");
    removed.push_back(others[i]);
  }
  return removed;
}

}  // namespace snug
