// ZeRO stages 1 and 2 (issue 30; docs/distributed.md): the optimizer of one rank, which keeps
// state for, and updates, only the slice of the flat layout it owns (train/zero_layout.h), then
// all-gathers the updated weights so that every rank holds them all again.
//
// The slice is cut into pieces: the part of each parameter that falls in [r*S, (r+1)*S), plus
// the padding where the slice reaches past the last parameter. Each piece is a Parameter of its
// own (1-D, its parameter's name and decay flag; the padding is "zero.padding", no decay) whose
// value views the flat weights, and the rank's optimizer is the --optim one made over these
// pieces: any elementwise optimizer (optim/registry.h: adamw_torch, sgd, lion, and whatever
// else declares itself elementwise) steps pieces exactly as it would step whole parameters, and
// its state is allocated per piece, so this rank's optimizer_state is that of S elements: 1/N of
// one process's state over the padded flat length (the padding holds state too, as DeepSpeed's
// fp32 partition does).
//
// Gradients: at stage 1 every rank holds the whole summed gradient (the stage-0 all-reduce), and
// the pieces' gradients are views of it for the step. At stage 2 the rank keeps only its slice:
// a flat buffer of S elements (category gradients; the weights' dtype, fp32 or bf16) made zero at
// the window's start (begin_window), into which each reduced bucket's owned elements are added
// (accumulate_owned; into a bf16 slice through an fp32 temporary, rounded once) on every
// micro-batch, and which the pieces' gradients view. bf16 pieces draw --bf16-full's stochastic
// rounding as their whole tensors (nn/parameter.h rounding_tensor), so the stages change where
// the bytes are, not the arithmetic.
//
// Checkpoints: state_tensors() are the pieces' states under "<param name>.<state>" (1-D), one
// rank's; train/zero_checkpoint.h writes them per rank and re-cuts them on resume.
//
// Stage 3 (train/zero3_params.h): the rank's slice is its shards, parameter i's part at o_i, so a
// piece is the part of one parameter the rank keeps, and each parameter whose last slice reaches
// past its end has a padding piece of its own ("zero.padding.<param name>"). Gradients as at
// stage 2 (the slice: 4 * sum padded_i / N bytes); no all-gather after the step: the shards are
// the weights, and the next block's gather brings the update.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/device.h"
#include "dist/communicator.h"
#include "optim/optimizer.h"
#include "train/zero3_params.h"
#include "train/zero_layout.h"

namespace snug {

// The padding piece's name (stage 3: followed by "." and its parameter's name).
inline constexpr const char* kZeroPaddingName = "zero.padding";

// One piece of a rank's slice: `count` elements of `source` from its element `begin` (source
// null: the padding, at stage 3 `padding_of`'s), at `slice_offset` in the slice.
struct ZeroPiece {
  const Parameter* source = nullptr;
  int64_t begin = 0, count = 0, slice_offset = 0;
  const Parameter* padding_of = nullptr;
};

// The pieces of rank `rank`'s slice of `layout`, in flat order.
std::vector<ZeroPiece> zero_pieces(const FlatLayout& layout, int rank);
// Stage 3: the pieces of rank `rank`'s shards, in parameter order.
std::vector<ZeroPiece> zero3_pieces(const Zero3Parameters& params, int rank);

// Throws snug::Error unless --optim `name` may be sharded at `stage` (elementwise), naming both.
void check_zero_optimizer(const std::string& name, int stage);

class ZeroOptimizer final : public Optimizer {
 public:
  // Builds the flat layout of `params` (their values become views of it), the rank's pieces and
  // the --optim `optim` over them. stage is 1 or 2.
  ZeroOptimizer(const std::string& optim, const ParameterList& params, const OptimizerOptions& o,
                int stage, dist::Communicator& comm, Device& dev);
  // Stage 3: the rank's optimizer over its shards of `params` (kept by the caller).
  ZeroOptimizer(const std::string& optim, Zero3Parameters& params, const OptimizerOptions& o,
                dist::Communicator& comm, Device& dev);
  ~ZeroOptimizer() override;

  // The update of the rank's pieces (stage 1: their gradients bound to the whole gradients
  // first), the gradients released, then the all-gather of the flat weights.
  void step(float lr) override;
  std::string name() const override { return inner_->name(); }
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override {
    return inner_->state_tensors();
  }
  nlohmann::json extra_state() const override { return inner_->extra_state(); }
  void load_extra_state(const nlohmann::json& s) override { inner_->load_extra_state(s); }
  bool memory_varies_by_step() const override { return inner_->memory_varies_by_step(); }

  int stage() const { return stage_; }
  // Stages 1-2 only.
  const FlatLayout& layout() const { return flat_->layout(); }
  // Stage 3 only.
  const Zero3Parameters& partitioned() const { return *z3_; }
  const std::vector<ZeroPiece>& pieces() const { return pieces_; }
  // The pieces as Parameters (what the inner optimizer steps; at stage 2 their gradients view
  // the slice between begin_window and release_gradients).
  const ParameterList& piece_params() const { return piece_list_; }

  // Stages 2-3: the window's gradient slice, zero-filled, and the pieces' gradients viewing it.
  void begin_window();
  // Stages 2-3: elements [begin, begin+count) of p's reduced gradient at `src` (host memory on the
  // device's side: data() pointers); adds the ones this rank owns into the slice.
  void accumulate_owned(const Parameter& p, int64_t begin, const float* src, int64_t count);
  // Drops the pieces' gradients and the stage-2 slice (idempotent).
  void release_gradients();
  // Seconds spent in the weight all-gathers since the last call.
  double take_communication_s() { return std::exchange(gather_s_, 0.0); }

 private:
  void bind_whole_gradients();  // stage 1
  void gather();
  // The pieces as Parameters viewing `weights` (the rank's slice), the inner optimizer over them.
  // `order`: the sharded parameters in the order a plain optimizer would hold them.
  void make_pieces(const Tensor& weights, const std::vector<const Parameter*>& order,
                   const std::string& optim, const OptimizerOptions& o);
  // Where the rank's part of a parameter lies: elements [begin, end) of it at `at` in the slice.
  struct Owned {
    int64_t begin = 0, end = 0, at = 0;
  };

  int stage_;
  dist::Communicator& comm_;
  Device& dev_;
  std::optional<FlatParameters> flat_;  // stages 1-2
  Zero3Parameters* z3_ = nullptr;       // stage 3
  std::vector<ZeroPiece> pieces_;
  std::vector<std::unique_ptr<Parameter>> owned_;
  ParameterList piece_list_;
  std::unordered_map<const Parameter*, Owned> owned_range_;
  Tensor slice_;                // stages 2-3: S elements of the weights' dtype, gradients
  int64_t owned_elements_ = 0;  // of the sharded parameters (the slice less its padding)
  int64_t received_ = 0;        // sums added into the slice since begin_window
  // A bf16 slice's later sums go through fp32 chunks of at most this many elements (256 KiB).
  static constexpr int64_t kWidenChunk = int64_t{1} << 16;
  std::unique_ptr<Optimizer> inner_;
  double gather_s_ = 0.0;
};

}  // namespace snug
