#include "train/trainer_state.h"

#include <cstdint>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "io/excerpt.h"
#include "io/fnv1a.h"
#include "io/json_input.h"

namespace snug {

namespace {

namespace fs = std::filesystem;

constexpr const char* kStateChecksum = "state_fnv1a64";
constexpr const char* kRequiredFiles[] = {kCheckpointModelFile, kCheckpointOptimizerFile};

// Field lookups that name the field and never quote the document (it is untrusted; a value
// could be megabytes long).
class Fields {
 public:
  explicit Fields(const std::string& path) : path_(path) {}

  const nlohmann::json& at(const nlohmann::json& obj, const std::string& parent,
                           const char* key) const {
    const std::string name = parent.empty() ? key : parent + "." + key;
    SNUG_CHECK(obj.is_object(), path_, ": ", parent, " is not an object");
    const auto it = obj.find(key);
    SNUG_CHECK(it != obj.end(), path_, ": missing field ", name);
    return *it;
  }
  int64_t integer(const nlohmann::json& obj, const std::string& parent, const char* key) const {
    const nlohmann::json& v = at(obj, parent, key);
    const std::string name = parent.empty() ? key : parent + "." + key;
    SNUG_CHECK(v.is_number_integer(), path_, ": ", name, " is not an integer");
    SNUG_CHECK(!v.is_number_unsigned() ||
                   v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
               path_, ": ", name, " ", v.get<uint64_t>(), " is out of range");
    return v.get<int64_t>();
  }
  const nlohmann::json& object(const nlohmann::json& obj, const std::string& parent,
                               const char* key) const {
    const nlohmann::json& v = at(obj, parent, key);
    SNUG_CHECK(v.is_object(), path_, ": ", parent.empty() ? key : parent + "." + key,
               " is not an object");
    return v;
  }
  std::string string(const nlohmann::json& obj, const std::string& parent, const char* key) const {
    const nlohmann::json& v = at(obj, parent, key);
    SNUG_CHECK(v.is_string(), path_, ": ", parent.empty() ? key : parent + "." + key,
               " is not a string");
    return v.get<std::string>();
  }

 private:
  const std::string& path_;
};

bool is_hex64(const std::string& s) {
  if (s.size() != 16) return false;
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The step a checkpoint folder's name promises: checkpoint-<N>, or checkpoint-<N>.replaced (a
// checkpoint set aside while being replaced). -1 when the folder is named otherwise.
int64_t folder_step(const std::string& path) {
  std::string folder = fs::path(path).parent_path().filename().string();
  const std::string aside = ".replaced";
  if (folder.size() > aside.size() &&
      folder.compare(folder.size() - aside.size(), std::string::npos, aside) == 0)
    folder.resize(folder.size() - aside.size());
  int64_t step = 0;
  return parse_checkpoint_name(folder, &step) ? step : -1;
}

}  // namespace

std::string trainer_state_checksum(const nlohmann::json& state) {
  nlohmann::json j = state;
  j.erase(kStateChecksum);
  return hex64(fnv1a64(j.dump()));
}

TrainerState parse_trainer_state(std::string_view text, const std::string& path) {
  // The depth-limited parser: no recursion on nesting, duplicate keys refused.
  const nlohmann::json j = parse_json_input(text, path);
  SNUG_CHECK(j.is_object(), path, ": not a JSON object");
  const auto version = j.find("format_version");
  SNUG_CHECK(version != j.end() && *version == nlohmann::json(kTrainerStateFormatVersion), path,
             ": unsupported format_version ",
             version == j.end()             ? std::string("(none)")
             : version->is_number_integer() ? version->dump()
                                            : std::string("(not an integer)"),
             " (this snug reads ", kTrainerStateFormatVersion, ")");
  const auto recorded = j.find(kStateChecksum);
  SNUG_CHECK(recorded != j.end() && recorded->is_string(), path, ": no ", kStateChecksum,
             " record; the checkpoint is damaged");
  const std::string sum = trainer_state_checksum(j);
  const std::string want = recorded->get<std::string>();
  SNUG_CHECK(sum == want, path, ": checksum mismatch (fnv1a64 ", sum, ", recorded ",
             is_hex64(want) ? want : std::string("(not 16 hex digits)"),
             "); trainer_state.json is corrupted");

  const Fields f(path);
  TrainerState st;
  st.step = f.integer(j, "", "global_step");
  const nlohmann::json& data = f.object(j, "", "data");
  st.data_epoch = f.integer(data, "data", "epoch");
  st.data_position = f.integer(data, "data", "position");
  const nlohmann::json& seed = f.at(j, "", "seed");
  SNUG_CHECK(seed.is_number_unsigned(), path, ": seed is not a non-negative integer");
  st.seed = seed.get<uint64_t>();
  const nlohmann::json& opt = f.object(j, "", "optimizer");
  st.optimizer = f.string(opt, "optimizer", "name");
  st.optimizer_steps = f.integer(opt, "optimizer", "steps");
  st.optimizer_extra = f.at(opt, "optimizer", "extra_state");
  st.config = f.object(j, "", "config");
  st.run = f.object(j, "", "run");
  SNUG_CHECK(f.string(j, "", "checksum_algorithm") == "fnv1a64", path,
             ": unknown checksum_algorithm");
  st.files = f.object(j, "", "files");
  for (const auto& [name, rec] : st.files.items()) {
    const std::string field = "files[\"" + excerpt(name) + "\"]";  // the name is the file's
    SNUG_CHECK(rec.is_object(), path, ": ", field, " is not an object");
    SNUG_CHECK(f.integer(rec, field, "size") >= 0, path, ": ", field, ".size is negative");
    SNUG_CHECK(is_hex64(f.string(rec, field, "fnv1a64")), path, ": ", field,
               ".fnv1a64 is not 16 hex digits");
  }
  // The optimizer's state: one file, or ZeRO's shards and their index (train/zero_checkpoint.h,
  // which checks the shards the index names).
  for (const char* name : kRequiredFiles)
    SNUG_CHECK(st.files.contains(name) || (std::string(name) == kCheckpointOptimizerFile &&
                                           st.files.contains("optimizer.index.json")),
               path, ": no record of ", name);
  if (j.contains("save_index")) {
    st.save_index = f.integer(j, "", "save_index");
    SNUG_CHECK(st.save_index >= 1, path, ": save_index ", st.save_index, " must be >= 1");
  }

  // The values a resume uses, beyond the checksum (a tool may have rewritten the file
  // consistently): a step count that fits the folder's name, a loader state and an optimizer
  // step count that can be.
  SNUG_CHECK(st.step >= 1, path, ": global_step ", st.step,
             " is not a number of completed steps (a checkpoint is saved after step 1 or later)");
  const int64_t named = folder_step(path);
  SNUG_CHECK(named < 0 || named == st.step, path, ": global_step ", st.step,
             " but the folder is checkpoint-", named, "; the checkpoint is damaged");
  SNUG_CHECK(st.data_epoch >= 0, path, ": data.epoch ", st.data_epoch, " must be >= 0");
  SNUG_CHECK(st.data_position >= 0, path, ": data.position ", st.data_position, " must be >= 0");
  SNUG_CHECK(st.optimizer_steps >= 0 && st.optimizer_steps <= st.step, path, ": optimizer.steps ",
             st.optimizer_steps, " must be between 0 and global_step ", st.step);
  return st;
}

TrainerState read_trainer_state(const std::string& dir) {
  const std::string path = (fs::path(dir) / kTrainerStateFile).string();
  return parse_trainer_state(read_input_file(path, path, 64 << 20), path);
}

bool parse_checkpoint_name(const std::string& name, int64_t* step) {
  const std::string prefix = "checkpoint-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  int64_t v = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    const int digit = name[i] - '0';
    if (v > (INT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *step = v;
  return true;
}

}  // namespace snug
