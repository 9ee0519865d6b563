#include "train/output_dir.h"

#include <algorithm>
#include <filesystem>

#include "train/checkpoint.h"
#include "train/run_record.h"

namespace snug {

namespace fs = std::filesystem;

std::vector<std::string> prepare_output_dir(const std::string& dir, const nlohmann::json& record,
                                            bool resuming, bool overwrite) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  // A complete checkpoint recording this run (only a resume continues a run).
  auto this_runs = [&](const fs::path& path) {
    if (!resuming || !fs::exists(path / "trainer_state.json", ec)) return false;
    try {
      return same_run(read_trainer_state(path.string()).run, record);
    } catch (const std::exception&) {
      return false;  // unreadable: not recognisably this run's
    }
  };
  std::vector<std::string> removed;
  if (overwrite) {
    // Every other checkpoint-* folder, complete or not: none may be mistaken for this run's. A
    // resume keeps its own run's checkpoints (the one it resumes from among them).
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (!e.is_directory() || name.rfind("checkpoint-", 0) != 0 || this_runs(e.path())) continue;
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
    std::error_code ec;
    fs::remove_all(others[i], ec);
    SNUG_CHECK(!ec, others[i], ": cannot remove (--save-total-limit): ", ec.message());
    removed.push_back(others[i]);
  }
  return removed;
}

}  // namespace snug
