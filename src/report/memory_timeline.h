// The memory timeline written by `--memory-timeline FILE.json` (`snug train` and `snug plan`):
// every allocation and free the device pool saw, in order, with its category, size, the
// optimizer step and the phase of the step (forward, backward, optimizer) it happened in. It is
// the data behind `snug plot-memory` (live memory over a step, stacked by category: the view
// PyTorch's memory visualizer gives, by category instead of by stack trace).
//
// The pool records (core/memory.h MemoryEvent) the signed size, category, running total and the
// phase label the model and trainer set ("forward h.3", "recompute h.3", "backward lm_head",
// "step 2 optimizer"). The step of forward/backward events is not in their label: they belong
// to the step whose "step N ..." label comes next (so a resumed run numbers them right too);
// events before the first forward (parameters, the setup) are step 0.
//
// JSON (docs/memory.md): {"format": "snug-memory-timeline", "version": 1, "device", "run",
//  "peak_bytes", "peak_phase", "steps", "categories": [...], "events": [{"seq", "time_s",
//  "action": "alloc"|"free", "category", "bytes" (> 0), "step", "phase", "label",
//  "live_bytes" (total after the event), "block" (the allocation's number, 1-based in allocation
//  order; a free carries its allocation's: what a placement simulation needs)}]}.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/memory.h"
#include "train/training_args.h"

namespace snug {

struct TimelineEvent {
  int64_t seq = 0;    // 0-based order
  double time_s = 0;  // since the pool was created
  int64_t delta = 0;  // + allocation, - free (bytes)
  Category category = Category::weights;
  int64_t step = 0;   // optimizer step (1-based); 0 before the first
  std::string phase;  // setup, forward, backward, optimizer, other
  std::string label;  // the pool's phase label
  int64_t live_total = 0;
  int64_t block = 0;  // the allocation's number; a free names the allocation it ends
};

// "forward h.3" -> forward; "backward ..." and "recompute ..." -> backward; "step N ..." ->
// optimizer; "init weights" or empty -> setup; anything else -> other.
std::string timeline_phase(const std::string& label);

// Sequence numbers, steps and phases for the pool's events.
std::vector<TimelineEvent> annotate_timeline(const std::vector<MemoryEvent>& events);

// `run`: a one-line description of the run (model, batch, optimizer), the plot's title.
nlohmann::json timeline_json(const std::vector<MemoryEvent>& events, const MemoryStats& stats,
                             const std::string& device, const std::string& run = "");
// "gpt2-124m, batch 4 x 256, adamw_torch, fp32" for `args`.
std::string describe_run(const TrainingArguments& args);

struct Timeline {
  std::vector<TimelineEvent> events;
  int64_t peak_bytes = 0;
  std::string peak_phase;
  int64_t steps = 0;
  std::string run;
  std::string source;  // the file it was read from, for messages ("" when built in memory)
};
// Reads what timeline_json wrote; throws snug::Error naming `source` and the bad key or event.
Timeline parse_timeline_json(const nlohmann::json& j, const std::string& source);

}  // namespace snug
