#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/disk_space.h"
#include "io/excerpt.h"
#include "io/finite.h"
#include "io/fnv1a.h"
#include "io/safetensors.h"
#include "models/hf_folder.h"
#include "models/hf_weights.h"
#include "train/quantized_base_file.h"

namespace snug {

namespace fs = std::filesystem;

namespace {

// Best effort: some filesystems refuse fsync on a directory.
void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
}

// tmp + fsync + rename.
void write_file_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  SNUG_CHECK(fd >= 0, tmp.string(), ": cannot create: ", std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      SNUG_CHECK(false, tmp.string(), ": write failed: ", why);
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  SNUG_CHECK(synced, tmp.string(), ": fsync failed: ", std::strerror(errno));
  SNUG_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, path.string(), ": cannot rename ",
             tmp.string(), ": ", std::strerror(errno));
}

// Test hook for the crash-safety test (tests/train/checkpoint_test.cpp): with
// SNUG_TEST_CRASH_DURING_SAVE=<step> in the environment, the process kills itself (SIGKILL: no
// destructors, no flushing, as a power cut or the OOM killer would) in the middle of saving that
// step's checkpoint, after model.safetensors is written into the temporary folder.
void crash_here_for_tests(int64_t step) {
  const char* v = std::getenv("SNUG_TEST_CRASH_DURING_SAVE");
  if (v != nullptr && std::to_string(step) == v) std::raise(SIGKILL);
}

// The same for the moment between moving an existing checkpoint-<step> aside and renaming the
// new one in (SNUG_TEST_CRASH_DURING_REPLACE=<step>; tests/cli/output_dir_cli_test.cpp).
void crash_while_replacing_for_tests(int64_t step) {
  const char* v = std::getenv("SNUG_TEST_CRASH_DURING_REPLACE");
  if (v != nullptr && std::to_string(step) == v) std::raise(SIGKILL);
}

constexpr const char* kReplacedSuffix = ".replaced";

// Checks size and checksum of `dir/name` against the trainer_state.json record.
void verify_file(const fs::path& dir, const std::string& name, const nlohmann::json& files) {
  const fs::path path = dir / name;
  SNUG_CHECK(files.contains(name), (dir / kTrainerStateFile).string(), ": no record of ", name);
  const nlohmann::json& rec = files.at(name);
  std::error_code ec;
  SNUG_CHECK(fs::is_regular_file(path, ec), path.string(), ": missing from the checkpoint");
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  SNUG_CHECK(!ec, path.string(), ": cannot stat: ", ec.message());
  const int64_t expected = rec.at("size").get<int64_t>();
  SNUG_CHECK(size == expected, path.string(), ": ",
             size < expected ? "truncated" : "has trailing bytes", " (", size, " bytes, expected ",
             expected, "); the checkpoint is damaged");
  const std::string sum = hex64(fnv1a64_file(path.string()));
  SNUG_CHECK(sum == rec.at("fnv1a64").get<std::string>(), path.string(),
             ": checksum mismatch (fnv1a64 ", sum, ", expected ",
             rec.at("fnv1a64").get<std::string>(), "); the checkpoint is corrupted");
}

// The safetensors spelling of the dtypes checkpoints hold.
const char* saved_dtype(DType t) {
  switch (t) {
    case DType::u8:
      return "U8";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    default:
      return "F32";
  }
}

}  // namespace

void verify_checkpoint_file(const std::string& dir, const std::string& name,
                            const nlohmann::json& files) {
  verify_file(fs::path(dir), name, files);
}

CheckpointModelFiles checkpoint_model_files(const Model& model, const ModelConfig& cfg) {
  CheckpointModelFiles f;
  if (!model.lora_adapters().empty() || has_quantized_base(model)) return f;
  // A model that `cfg` does not describe (a Trainer given a model built otherwise) gets no
  // config.json rather than a wrong one.
  const ModelSummary s = model.summary();
  int64_t n = 0;
  for (const Parameter* p : model.parameters()) n += p->numel();
  if (s.model_type != cfg.shape.model_type || s.n_layer != cfg.shape.n_layer ||
      s.n_embd != cfg.shape.n_embd || s.n_head != cfg.shape.n_head ||
      s.vocab_size != cfg.shape.vocab_size || s.n_positions != cfg.shape.n_positions ||
      n != cfg.num_params)
    return f;
  f.config = hf_config_json(cfg, model.param_dtype());
  f.source_folder = cfg.folder;
  return f;
}

namespace {

// The save_index of a checkpoint saved into `dir` now (train/trainer_state.h): one more than the
// highest of its complete checkpoints (an unreadable one counts as none).
int64_t next_save_index(const std::string& dir) {
  int64_t highest = 0;
  for (const auto& [step, path] : list_checkpoints(dir)) {
    try {
      highest = std::max(highest, read_trainer_state(path).save_index);
    } catch (const Error&) {
    }
  }
  return highest + 1;
}

// Bytes of the regular files under `dir` (0 when it does not exist).
int64_t dir_bytes(const fs::path& dir) {
  std::error_code ec;
  int64_t bytes = 0;
  if (!fs::is_directory(dir, ec)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) bytes += static_cast<int64_t>(e.file_size(ec));
  return bytes;
}

// An upper bound of a safetensors header: 8 bytes of length, and per tensor its name and at
// most 160 bytes of JSON (dtype, a shape of up to 4 dims, two 20-digit offsets), 4 KiB besides.
int64_t header_bound(int64_t tensors, int64_t name_bytes) {
  return 8 + 4096 + name_bytes + 160 * tensors;
}

// The bytes a checkpoint of this model and optimizer takes (model, optimizer, quantized base,
// config and side files, trainer state), from above: what the disk must have free.
int64_t checkpoint_bytes(const Model& model, Optimizer& optimizer, const CheckpointModelFiles& hf) {
  int64_t bytes = 0, tensors = 0, names = 0;
  for (const Parameter* p : model.parameters()) {
    if (p->quantized()) continue;
    bytes += p->numel() * static_cast<int64_t>(dtype_size(p->dtype()));  // gathered or not
    ++tensors;
    names += static_cast<int64_t>(p->name.size());
  }
  bytes += header_bound(tensors, names);
  tensors = names = 0;
  for (const auto& [name, t] : optimizer.state_tensors()) {
    bytes += t->nbytes();
    ++tensors;
    names += static_cast<int64_t>(name.size());
  }
  bytes += header_bound(tensors, names);
  if (has_quantized_base(model)) {
    // Up to 8 tensors per quantized parameter (codes, absmax, ...), each "<name>.<part>".
    tensors = names = 0;
    for (const Parameter* p : model.parameters())
      if (p->quantized()) {
        tensors += 8;
        names += 8 * (static_cast<int64_t>(p->name.size()) + 24);
      }
    bytes += quantized_base_bytes(model) + header_bound(tensors, names);
  }
  if (!hf.config.is_null()) {
    bytes += static_cast<int64_t>(hf.config.dump(2).size()) + 1;
    std::error_code ec;
    for (const std::string& n : hf_side_file_names()) {
      const fs::path f = fs::path(hf.source_folder) / n;
      if (!hf.source_folder.empty() && fs::is_regular_file(f, ec))
        bytes += static_cast<int64_t>(fs::file_size(f, ec));
    }
  }
  return bytes + (1 << 20);  // trainer_state.json (the run's config and record) and slack
}

}  // namespace

// The parameters save_checkpoint with a gatherer gathers, in order (see checkpoint.h).
bool gathered_for_checkpoint(const Parameter& p) {
  return !p.quantized() && p.numel() > 0;
}

void follow_checkpoint_gathers(const Model& model, ParameterGatherer& gatherer) {
  for (Parameter* p : model.parameters())
    if (gathered_for_checkpoint(*p)) {
      gatherer.acquire(*p);
      gatherer.release(*p);
    }
}

std::string save_checkpoint(const std::string& output_dir, const CheckpointState& state,
                            const Model& model, Optimizer& optimizer,
                            const CheckpointModelFiles& hf, const OptimizerStateFiles& opt_files,
                            ParameterGatherer* gatherer) {
  SNUG_CHECK(!model.device().is_meta(), "checkpoints need a real device, not meta");
  const fs::path out(output_dir);
  const std::string base = "checkpoint-" + std::to_string(state.step);
  // Weights that went non-finite without a non-finite loss (the update after the step's loss, a
  // degenerate hyperparameter) would make a checkpoint that resumes into NaN: none is written.
  // (Partitioned ones are checked as they are gathered, below.)
  const auto check_finite_value = [&](const Parameter& p) {
    if (const std::optional<NonFinite> bad = first_non_finite(p.value))
      throw Error(detail::concat(
          (out / base).string(), ": not saved: parameter '", p.name, "' holds ",
          bad->nan ? "nan" : "inf", " at element ", bad->index, " after step ", state.step,
          "; training diverged (lower --learning-rate or check the optimizer's flags)"));
  };
  for (const Parameter* p : model.parameters())
    if (!p->sliced()) check_finite_value(*p);
  const fs::path final_dir = out / base;
  const fs::path tmp_dir = out / (base + ".tmp");
  std::error_code ec;
  fs::create_directories(out, ec);
  SNUG_CHECK(!ec, output_dir, ": cannot create the output directory: ", ec.message());
  // Refused before writing when it cannot fit (io/disk_space.h). A leftover *.tmp of this step
  // is removed below and counts as free.
  check_disk_space(output_dir, checkpoint_bytes(model, optimizer, hf) - dir_bytes(tmp_dir),
                   (out / base).string());
  fs::remove_all(tmp_dir, ec);
  fs::create_directories(tmp_dir, ec);
  SNUG_CHECK(!ec, tmp_dir.string(), ": cannot create: ", ec.message());

  // A quantized frozen base goes to its own file (train/quantized_base_file.h), as it was held.
  if (gatherer == nullptr) {
    std::vector<std::pair<std::string, const Tensor*>> weights;
    for (const Parameter* p : model.parameters())
      if (!p->quantized()) weights.emplace_back(p->name, &p->value);
    save_safetensors((tmp_dir / kCheckpointModelFile).string(), weights, {{"format", "pt"}});
  } else {
    // ZeRO stage 3: one parameter whole at a time (the same file, byte for byte).
    std::vector<Parameter*> ps;
    std::vector<SafetensorsEntry> entries;
    for (Parameter* p : model.parameters())
      if (!p->quantized()) {
        ps.push_back(p);
        entries.push_back({p->name, p->dtype(), p->shape()});
      }
    save_safetensors_streamed((tmp_dir / kCheckpointModelFile).string(), entries,
                              {{"format", "pt"}}, [&](size_t i, void* dst) {
                                Parameter& p = *ps[i];
                                SNUG_ASSERT(gathered_for_checkpoint(p), p.name);
                                gatherer->acquire(p);
                                check_finite_value(p);
                                p.value.device().download(
                                    static_cast<unsigned char*>(dst),
                                    static_cast<const unsigned char*>(p.value.raw()),
                                    p.value.nbytes());
                                gatherer->release(p);
                              });
  }
  const bool quantized = has_quantized_base(model);
  if (quantized) save_quantized_base((tmp_dir / kQuantizedBaseFile).string(), model);
  crash_here_for_tests(state.step);
  std::vector<std::string> names = {kCheckpointModelFile};
  if (opt_files.save) {
    for (const std::string& n : opt_files.save(tmp_dir.string())) names.push_back(n);
  } else {
    std::vector<std::pair<std::string, const Tensor*>> opt_tensors;
    for (const auto& [name, t] : optimizer.state_tensors()) opt_tensors.emplace_back(name, t);
    save_safetensors((tmp_dir / kCheckpointOptimizerFile).string(), opt_tensors,
                     {{"optimizer", optimizer.name()}});
    names.push_back(kCheckpointOptimizerFile);
  }
  // A full fine-tune's checkpoint is a model folder too (see checkpoint.h).
  if (!hf.config.is_null()) {
    write_file_atomic(tmp_dir / kHfConfigFile, hf.config.dump(2) + "\n");
    names.push_back(kHfConfigFile);
    for (const std::string& n : copy_hf_side_files(hf.source_folder, tmp_dir.string()))
      names.push_back(n);
  }

  nlohmann::json j;
  j["format_version"] = kTrainerStateFormatVersion;
  j["global_step"] = state.step;
  j["save_index"] = next_save_index(output_dir);
  j["data"] = {{"epoch", state.data_epoch}, {"position", state.data_position}};
  j["seed"] = state.seed;
  j["optimizer"] = {{"name", optimizer.name()},
                    {"steps", optimizer.steps()},
                    {"extra_state", optimizer.extra_state()}};
  j["config"] = state.config;
  j["run"] = state.run;
  j["checksum_algorithm"] = "fnv1a64";
  nlohmann::json files = nlohmann::json::object();
  if (quantized) names.push_back(kQuantizedBaseFile);
  for (const std::string& name : names) {
    const fs::path p = tmp_dir / name;
    files[name] = {{"size", static_cast<int64_t>(fs::file_size(p))},
                   {"fnv1a64", hex64(fnv1a64_file(p.string()))}};
  }
  j["files"] = files;
  j["state_fnv1a64"] = trainer_state_checksum(j);
  write_file_atomic(tmp_dir / kTrainerStateFile, j.dump(2) + "\n");
  fsync_dir(tmp_dir);

  // Replacing a checkpoint of the same step: the old one is renamed aside, the new one renamed
  // in, and only then the old one removed, so that a complete checkpoint-<step> (or, killed
  // between the two renames, checkpoint-<step>.replaced, which resolve_checkpoint takes) is on
  // disk at every moment.
  const fs::path aside = out / (base + kReplacedSuffix);
  if (fs::exists(final_dir, ec)) {
    fs::remove_all(aside, ec);
    SNUG_CHECK(!ec, aside.string(), ": cannot remove: ", ec.message());
    fs::rename(final_dir, aside, ec);
    SNUG_CHECK(!ec, final_dir.string(), ": cannot move aside to ", aside.string(), ": ",
               ec.message());
    fsync_dir(out);
    crash_while_replacing_for_tests(state.step);
  }
  fs::rename(tmp_dir, final_dir, ec);
  SNUG_CHECK(!ec, final_dir.string(), ": cannot rename ", tmp_dir.string(), ": ", ec.message());
  fsync_dir(out);
  fs::remove_all(aside, ec);
  SNUG_CHECK(!ec, aside.string(), ": cannot remove: ", ec.message());
  return final_dir.string();
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::map<int64_t, fs::path> found, replaced;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(dir), ec)) {
    std::string name = e.path().filename().string();
    const size_t n = std::strlen(kReplacedSuffix);
    const bool aside =
        name.size() > n && name.compare(name.size() - n, std::string::npos, kReplacedSuffix) == 0;
    if (aside) name.resize(name.size() - n);
    int64_t step = 0;
    if (!e.is_directory() || !parse_checkpoint_name(name, &step)) continue;
    if (!fs::exists(e.path() / kTrainerStateFile, ec)) continue;  // incomplete
    (aside ? replaced : found)[step] = e.path();
  }
  // A checkpoint-<N>.replaced stands in for a checkpoint-<N> that is missing (a save killed
  // between its two renames).
  for (const auto& [step, path] : replaced) found.emplace(step, path);
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& [step, path] : found) out.emplace_back(step, path.string());
  return out;
}

std::string resolve_checkpoint(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  SNUG_CHECK(fs::is_directory(d, ec), "--resume-from ", dir, ": no such directory");
  if (fs::exists(d / kTrainerStateFile, ec)) return d.string();
  const auto all = list_checkpoints(dir);
  SNUG_CHECK(!all.empty(), "--resume-from ", dir,
             ": neither a checkpoint (no trainer_state.json) nor an output directory holding a "
             "complete checkpoint-<step>");
  // The one saved last: after a resume from an older step, a higher step may be left from the
  // trajectory that resume abandoned. By save_index, then step (unreadable: the load names it).
  std::string last = all.back().second;
  int64_t last_index = -1;
  for (const auto& [step, path] : all) {
    int64_t index = 0;
    try {
      index = read_trainer_state(path).save_index;
    } catch (const Error&) {
    }
    if (index >= last_index) {
      last_index = index;
      last = path;
    }
  }
  return last;
}

CheckpointState load_checkpoint(const std::string& dir, Model& model, Optimizer& optimizer,
                                const OptimizerStateFiles& opt_files) {
  SNUG_CHECK(!model.device().is_meta(), "checkpoints need a real device, not meta");
  const fs::path d(dir);
  const std::string state_path = (d / kTrainerStateFile).string();
  const TrainerState ts = read_trainer_state(dir);
  verify_file(d, kCheckpointModelFile, ts.files);
  if (!opt_files.load) verify_file(d, kCheckpointOptimizerFile, ts.files);
  if (has_quantized_base(model)) verify_file(d, kQuantizedBaseFile, ts.files);
  // The model-folder files a full fine-tune's checkpoint records (by their known names only:
  // the record is read from a file).
  std::vector<std::string> folder_files = hf_side_file_names();
  folder_files.insert(folder_files.begin(), kHfConfigFile);
  for (const std::string& name : folder_files)
    if (ts.files.is_object() && ts.files.contains(name)) verify_file(d, name, ts.files);
  CheckpointState st = ts;  // the resume's part of the document
  const int64_t opt_steps = ts.optimizer_steps;
  const nlohmann::json& extra = ts.optimizer_extra;
  SNUG_CHECK(st.optimizer == optimizer.name(), state_path, ": saved with --optim ",
             excerpt(st.optimizer), ", cannot resume with --optim ", optimizer.name());

  {
    const SafetensorsFile f((d / kCheckpointModelFile).string());
    size_t stored = 0;
    for (const Parameter* p : model.parameters()) stored += p->quantized() ? 0 : 1;
    SNUG_CHECK(f.names().size() == stored, f.path(), ": holds ", f.names().size(),
               " tensors, the model has ", stored, " parameters to restore");
    for (Parameter* p : model.parameters()) {
      if (p->quantized()) continue;
      SNUG_CHECK(f.contains(p->name), f.path(), ": no tensor '", p->name, "'");
      // F32 parameters, or 16-bit ones (--bf16-full, --torch-dtype): stored as they are, loaded
      // bit for bit.
      const char* want = saved_dtype(p->dtype());
      SNUG_CHECK(
          f.info(p->name).dtype == want, f.path(), ": tensor '", p->name, "' is ",
          f.info(p->name).dtype, ", the run's parameters are ", want,
          " (resume with the --bf16-full/--torch-dtype setting the checkpoint was saved with)");
      // ZeRO stage 3: each rank reads its own slice; the model is never whole on the device.
      if (p->sliced())
        read_into_slice(f, p->name, *p, false);
      else
        f.read_into(p->name, p->value);
    }
  }
  if (has_quantized_base(model)) load_quantized_base((d / kQuantizedBaseFile).string(), model);
  if (opt_files.load) {
    opt_files.load(dir, ts.files);
  } else {
    const SafetensorsFile f((d / kCheckpointOptimizerFile).string());
    const auto tensors = optimizer.state_tensors();
    SNUG_CHECK(f.names().size() == tensors.size(), f.path(), ": holds ", f.names().size(),
               " tensors, optimizer ", optimizer.name(), " has ", tensors.size());
    for (const auto& [name, t] : tensors) {
      SNUG_CHECK(f.contains(name), f.path(), ": no tensor '", name, "'");
      const SafetensorsFile::Info& inf = f.info(name);
      const char* want = saved_dtype(t->dtype());
      SNUG_CHECK(inf.dtype == want, f.path(), ": tensor '", name, "' is ", inf.dtype, ", expected ",
                 want);
      SNUG_CHECK(inf.shape == std::vector<int64_t>(t->shape().begin(), t->shape().end()), f.path(),
                 ": tensor '", name, "' has the wrong shape");
      read_raw_tensor(f, name, *t);
    }
  }
  optimizer.set_steps(opt_steps);
  if (opt_files.load) return st;  // the state files carried their extra state too
  try {
    optimizer.load_extra_state(extra);
  } catch (const nlohmann::json::exception& e) {
    SNUG_CHECK(false, state_path, ": optimizer extra_state does not match the model (", e.what(),
               ")");
  }
  return st;
}

}  // namespace snug
