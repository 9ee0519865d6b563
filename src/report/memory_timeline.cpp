#include "report/memory_timeline.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug {

namespace {

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The category named `name` in event `seq` of `source`; an unknown name is quoted as an excerpt
// (core's parse_category would quote it whole).
Category timeline_category(const std::string& name, int64_t seq, const std::string& source) {
  for (int i = 0; i < kNumCategories; ++i)
    if (name == category_name(category_at(i))) return category_at(i);
  throw Error(
      detail::concat(source, ": event ", seq, ": unknown memory category '", excerpt(name), "'"));
}

// N of a "step N ..." label, or -1.
int64_t step_of_label(const std::string& label) {
  if (!starts_with(label, "step ")) return -1;
  char* end = nullptr;
  const long long n = std::strtoll(label.c_str() + 5, &end, 10);
  return end != label.c_str() + 5 && n > 0 ? static_cast<int64_t>(n) : -1;
}

}  // namespace

std::string timeline_phase(const std::string& label) {
  if (starts_with(label, "forward")) return "forward";
  if (starts_with(label, "backward") || starts_with(label, "recompute")) return "backward";
  if (step_of_label(label) > 0) return "optimizer";
  if (label.empty() || label == "init weights") return "setup";
  return "other";
}

std::vector<TimelineEvent> annotate_timeline(const std::vector<MemoryEvent>& events) {
  std::vector<TimelineEvent> out;
  out.reserve(events.size());
  int64_t last_step = 0;  // the last "step N" label seen
  size_t pending = 0;     // first event of the current step not yet numbered
  bool in_step = false;   // a forward/backward was seen since the last "step N" label
  for (size_t i = 0; i < events.size(); ++i) {
    const MemoryEvent& e = events[i];
    TimelineEvent t;
    t.seq = static_cast<int64_t>(i);
    t.time_s = e.time_s;
    t.delta = e.bytes;
    t.category = e.category;
    t.label = e.phase;
    t.phase = timeline_phase(e.phase);
    t.live_total = e.live_total;
    t.block = e.block;
    const int64_t n = step_of_label(e.phase);
    if (n > 0) {
      // The forward/backward events since the previous step belong to this one.
      for (size_t k = pending; k < out.size(); ++k) out[k].step = n;
      t.step = n;
      last_step = n;
      pending = i + 1;
      in_step = false;
    } else if (t.phase == "forward" || t.phase == "backward") {
      if (!in_step) pending = i;
      in_step = true;
      t.step = last_step + 1;  // provisional: renumbered when this step's label appears
    } else {
      t.step = in_step ? last_step + 1 : last_step;
      if (!in_step) pending = i + 1;
    }
    out.push_back(std::move(t));
  }
  return out;
}

nlohmann::json timeline_json(const std::vector<MemoryEvent>& events, const MemoryStats& stats,
                             const std::string& device, const std::string& run) {
  const std::vector<TimelineEvent> ev = annotate_timeline(events);
  nlohmann::json j;
  j["format"] = "snug-memory-timeline";
  j["version"] = 1;
  j["device"] = device;
  j["run"] = run;
  j["peak_bytes"] = stats.peak_total;
  j["peak_phase"] = stats.peak_phase;
  int64_t steps = 0;
  for (const TimelineEvent& e : ev) steps = std::max(steps, e.step);
  j["steps"] = steps;
  j["categories"] = nlohmann::json::array();
  for (int i = 0; i < kNumCategories; ++i) j["categories"].push_back(category_name(category_at(i)));
  nlohmann::json arr = nlohmann::json::array();
  for (const TimelineEvent& e : ev)
    arr.push_back({{"seq", e.seq},
                   {"time_s", e.time_s},
                   {"action", e.delta >= 0 ? "alloc" : "free"},
                   {"category", category_name(e.category)},
                   {"bytes", e.delta >= 0 ? e.delta : -e.delta},
                   {"step", e.step},
                   {"phase", e.phase},
                   {"label", e.label},
                   {"live_bytes", e.live_total},
                   {"block", e.block}});
  j["events"] = std::move(arr);
  return j;
}

Timeline parse_timeline_json(const nlohmann::json& j, const std::string& source) {
  SNUG_CHECK(j.is_object() && j.value("format", "") == "snug-memory-timeline", source,
             ": not a snug memory timeline (no \"format\": \"snug-memory-timeline\"; write one "
             "with --memory-timeline)");
  SNUG_CHECK(j.contains("events") && j["events"].is_array(), source, ": no \"events\" array");
  Timeline t;
  t.source = source;
  try {
    t.peak_bytes = j.at("peak_bytes").get<int64_t>();
    t.peak_phase = j.value("peak_phase", "");
    t.steps = j.value("steps", int64_t{0});
    t.run = j.value("run", "");
    for (const nlohmann::json& e : j["events"]) {
      TimelineEvent ev;
      ev.seq = e.at("seq").get<int64_t>();
      ev.time_s = e.value("time_s", 0.0);
      const std::string action = e.at("action").get<std::string>();
      SNUG_CHECK(action == "alloc" || action == "free", source, ": event ", ev.seq,
                 ": action must be alloc or free, got '", excerpt(action), "'");
      const int64_t bytes = e.at("bytes").get<int64_t>();
      ev.delta = action == "alloc" ? bytes : -bytes;
      ev.category = timeline_category(e.at("category").get<std::string>(), ev.seq, source);
      ev.step = e.at("step").get<int64_t>();
      ev.phase = e.at("phase").get<std::string>();
      ev.label = e.value("label", "");
      ev.live_total = e.at("live_bytes").get<int64_t>();
      ev.block = e.value("block", int64_t{0});
      t.events.push_back(std::move(ev));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": malformed memory timeline: " + e.what());
  }
  return t;
}

std::string describe_run(const TrainingArguments& args) {
  return detail::concat(
      args.model_config().shape.name, ", batch ", args.per_device_train_batch_size, " x ",
      args.seq_len,
      args.gradient_accumulation_steps > 1
          ? detail::concat(" x ", args.gradient_accumulation_steps, " accumulation")
          : std::string(),
      ", ", args.optim,
      args.compute_dtype() == ComputeDType::f16    ? ", fp16"
      : args.bf16_full                             ? ", bf16-full"
      : args.master_weights()                      ? ", deepspeed layout"
      : args.compute_dtype() == ComputeDType::bf16 ? ", bf16"
                                                   : ", fp32",
      args.gradient_checkpointing ? ", checkpointing " + args.checkpoint_policy : std::string());
}

}  // namespace snug
