// train/zero_layout.h and train/zero_optimizer.h: DeepSpeed's stage 1/2 flat layout (padding to a
// multiple of 2N, N equal slices, parameters straddling ranks), the weights as views into it,
// and a rank's optimizer over the pieces of its slice; stage 3's per-parameter partitioning.
#include "train/zero_layout.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "dist/single_process.h"
#include "kernels/backends.h"
#include "optim/optimizer.h"
#include "train/grad_sync.h"
#include "train/zero3_params.h"
#include "train/zero_optimizer.h"

namespace snug {
namespace {
namespace zero_layout_test {

// Rank `r` of a world of `n` whose collectives do nothing (what a rank's own arithmetic needs).
class Idle final : public dist::Communicator {
 public:
  Idle(int r, int n) : r_(r), n_(n) {}
  int rank() const override { return r_; }
  int size() const override { return n_; }
  std::string_view name() const override { return "idle"; }
  dist::Request start_all_reduce_sum(float*, size_t) override { return {}; }
  dist::Request start_all_reduce_sum(double*, size_t) override { return {}; }
  dist::Request start_all_reduce_sum(int64_t*, size_t) override { return {}; }
  dist::Request start_reduce_scatter_sum(const float*, float*, size_t) override { return {}; }
  dist::Request start_all_gather(const float*, float*, size_t) override {
    ++gathers;
    return {};
  }
  dist::Request start_all_gather(const uint16_t*, uint16_t*, size_t) override {
    ++gathers;
    return {};
  }
  dist::Request start_all_gather_many(const std::vector<dist::GatherPart<float>>& parts) override {
    ++gathers;
    parts_gathered += static_cast<int>(parts.size());
    return {};
  }
  dist::Request start_broadcast(void*, size_t, int) override { return {}; }
  dist::Request start_barrier() override { return {}; }
  void finish() override {}
  [[noreturn]] void abort(int, std::string_view) override { std::abort(); }
  int gathers = 0;
  int parts_gathered = 0;  // by start_all_gather_many

 private:
  int r_, n_;
};

struct Params {
  Params(Device& dev, const std::vector<int64_t>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto p = std::make_unique<Parameter>();
      p->name = "p" + std::to_string(i);
      p->decay = i % 2 == 0;
      p->value = Tensor::empty({sizes[i]}, DType::f32, Category::weights, dev);
      for (int64_t j = 0; j < sizes[i]; ++j)
        p->value.data<float>()[j] = 0.01f * static_cast<float>(100 * i + j) - 0.5f;
      list.push_back(p.get());
      owned.push_back(std::move(p));
    }
  }
  void set_grads() {
    for (size_t i = 0; i < owned.size(); ++i) {
      float* g = owned[i]->grad_for_accumulation();
      for (int64_t j = 0; j < owned[i]->numel(); ++j)
        g[j] = 0.003f * static_cast<float>((7 * i + 3 * j) % 11) - 0.015f;
    }
  }
  std::vector<std::unique_ptr<Parameter>> owned;
  ParameterList list;
};

int64_t cat(const MemoryStats& m, Category c, bool max = true) {
  return (max ? m.max_by_category : m.live)[static_cast<size_t>(c)];
}

// padded(P, N) = ceil(P / 2N) * 2N (docs/distributed.md).
TEST(ZeroLayout, PadsToAMultipleOfTwiceTheWorld) {
  EXPECT_EQ(zero_padded_numel(10, 1), 10);
  EXPECT_EQ(zero_padded_numel(11, 1), 12);
  EXPECT_EQ(zero_padded_numel(10, 2), 12);
  EXPECT_EQ(zero_padded_numel(12, 2), 12);
  EXPECT_EQ(zero_padded_numel(13, 3), 18);
  EXPECT_EQ(zero_padded_numel(1, 4), 8);
}

// 3 + 5 + 2 = 10 elements over 2 ranks: padded to 12, slices of 6. p1 straddles the ranks; rank 1
// ends with 2 elements of padding.
TEST(ZeroLayout, SlicesCutParametersAndPadTheLastRank) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  ps.owned[1]->requires_grad = true;
  const FlatLayout l = flat_layout(ps.list, 2, 1);
  EXPECT_EQ(l.numel, 10);
  EXPECT_EQ(l.padded, 12);
  EXPECT_EQ(l.shard, 6);
  ASSERT_EQ(l.entries.size(), 3u);
  EXPECT_EQ(l.entries[1].offset, 3);
  EXPECT_EQ(l.entries[2].offset, 8);
  const std::vector<ZeroPiece> r0 = zero_pieces(l, 0), r1 = zero_pieces(l, 1);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(r0[0].source, ps.list[0]);
  EXPECT_EQ(r0[1].source, ps.list[1]);
  EXPECT_EQ(r0[1].begin, 0);
  EXPECT_EQ(r0[1].count, 3);
  EXPECT_EQ(r0[1].slice_offset, 3);
  ASSERT_EQ(r1.size(), 3u);
  EXPECT_EQ(r1[0].source, ps.list[1]);
  EXPECT_EQ(r1[0].begin, 3);
  EXPECT_EQ(r1[0].count, 2);
  EXPECT_EQ(r1[1].source, ps.list[2]);
  EXPECT_EQ(r1[1].slice_offset, 2);
  EXPECT_EQ(r1[2].source, nullptr);  // the padding
  EXPECT_EQ(r1[2].count, 2);
  EXPECT_EQ(r1[2].slice_offset, 4);
}

// Frozen and quantized parameters stay out; bf16 trainable parameters (--bf16-full,
// --precision-layout deepspeed) make a bf16 layout, and a layout of two dtypes is refused with the
// stage. A bf16 buffer is 2 bytes an element, over any number of ranks (its all-gather moves
// 16-bit elements).
TEST(ZeroLayout, TakesTrainableParametersOfOneDtype) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  ps.owned[0]->requires_grad = false;
  EXPECT_EQ(flat_layout(ps.list, 2, 2).numel, 7);
  EXPECT_EQ(flat_layout(ps.list, 2, 2).dtype, DType::f32);
  ps.owned[2]->value = Tensor::zeros({2}, DType::bf16, Category::weights, dev);
  try {
    flat_layout(ps.list, 2, 2);
    FAIL() << "two dtypes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--zero-stage 2: parameter p2 is bf16"), std::string::npos)
        << e.what();
  }
  ps.owned[1]->value = Tensor::zeros({5}, DType::bf16, Category::weights, dev);
  const FlatLayout l = flat_layout(ps.list, 2, 2);
  EXPECT_EQ(l.dtype, DType::bf16);
  EXPECT_EQ(l.padded, 8);
  const FlatParameters two(ps.list, 2, 2, dev);
  EXPECT_EQ(two.buffer().dtype(), DType::bf16);
  EXPECT_EQ(two.buffer().numel(), 8);
  EXPECT_EQ(ps.owned[1]->value.data_u16(), two.buffer().data_u16());
}

// The values survive, each is a view of the one buffer, and the tracked weights never hold
// them twice (staged through host memory): the weights' maximum is the padded buffer.
TEST(ZeroLayout, ParametersBecomeViewsWithoutHoldingTheWeightsTwice) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  const std::vector<float> before(ps.owned[1]->value.data<float>(),
                                  ps.owned[1]->value.data<float>() + 5);
  const FlatParameters flat(ps.list, 2, 1, dev);
  EXPECT_EQ(ps.owned[1]->value.shape(), (Shape{5}));
  EXPECT_EQ(ps.owned[1]->value.data<float>(), flat.buffer().data<float>() + 3);
  EXPECT_EQ(
      std::vector<float>(ps.owned[1]->value.data<float>(), ps.owned[1]->value.data<float>() + 5),
      before);
  EXPECT_EQ(flat.buffer().data<float>()[10], 0.0f);  // padding
  const MemoryStats m = dev.pool().stats();
  EXPECT_EQ(cat(m, Category::weights, false), 12 * 4);
  EXPECT_EQ(cat(m, Category::weights), 12 * 4);
}

// One rank of one: the sharded AdamW steps exactly as AdamW over the whole parameters, and the
// state is that of the padded length.
TEST(ZeroOptimizer, OneRankStepsAsThePlainOptimizer) {
  Device dev(cpu_backend());
  Params a(dev, {3, 5, 3}), b(dev, {3, 5, 3});
  OptimizerOptions o;
  o.weight_decay = 0.1f;
  const std::unique_ptr<Optimizer> plain = make_optimizer("adamw_torch", a.list, o);
  dist::SingleProcess one;
  ZeroOptimizer z("adamw_torch", b.list, o, 1, one, dev);
  for (int step = 0; step < 3; ++step) {
    a.set_grads();
    b.set_grads();
    plain->step(1e-2f);
    z.step(1e-2f);
    for (size_t i = 0; i < a.owned.size(); ++i) {
      a.owned[i]->free_grad();
      b.owned[i]->free_grad();
    }
  }
  EXPECT_EQ(z.steps(), 3);
  for (size_t i = 0; i < a.owned.size(); ++i)
    for (int64_t j = 0; j < a.owned[i]->numel(); ++j)
      EXPECT_EQ(a.owned[i]->value.data<float>()[j], b.owned[i]->value.data<float>()[j])
          << a.owned[i]->name << "[" << j << "]";
  // 11 elements padded to a multiple of 2: 8 bytes of AdamW state for each of 12, the padding's
  // included.
  int64_t state = 0;
  for (const auto& [name, t] : z.state_tensors()) state += t->nbytes();
  EXPECT_EQ(state, 8 * 12);
}

// Rank 1 of 2 keeps state for its 6 elements only (1/2 of the padded 12), steps only them, and
// all-gathers once per step; the pieces keep their parameters' names.
TEST(ZeroOptimizer, ARankKeepsStateForItsSliceOnly) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  const std::vector<float> p0(ps.owned[0]->value.data<float>(),
                              ps.owned[0]->value.data<float>() + 3);
  Idle rank1(1, 2);
  ZeroOptimizer z("adamw_torch", ps.list, OptimizerOptions{}, 1, rank1, dev);
  ps.set_grads();
  z.step(1e-2f);
  EXPECT_EQ(rank1.gathers, 1);
  EXPECT_EQ(cat(dev.pool().stats(), Category::optimizer_state), 8 * 6);
  std::vector<std::string> names;
  for (const auto& [name, t] : z.state_tensors()) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"p1.exp_avg", "p1.exp_avg_sq", "p2.exp_avg", "p2.exp_avg_sq",
                                      "zero.padding.exp_avg", "zero.padding.exp_avg_sq"}));
  // p0 is rank 0's: untouched here (the all-gather would bring it); p2 moved.
  EXPECT_EQ(
      std::vector<float>(ps.owned[0]->value.data<float>(), ps.owned[0]->value.data<float>() + 3),
      p0);
}

// Stage 2: the slice (S fp32, gradients) takes the owned elements of each reduced sum, added up
// over micro-batches; the parameters' own gradients are temporary.
TEST(ZeroOptimizer, StageTwoKeepsTheOwnedElementsOfEachSum) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  Idle rank1(1, 2);
  ZeroOptimizer z("sgd", ps.list, OptimizerOptions{}, 2, rank1, dev);
  EXPECT_EQ(ps.owned[0]->grad_category, Category::temporary);
  z.begin_window();
  const std::vector<float> sum = {1, 2, 3, 4, 5};
  z.accumulate_owned(*ps.list[1], 0, sum.data(), 5);  // elements 3..4 are rank 1's
  z.accumulate_owned(*ps.list[1], 3, sum.data(), 2);  // again: adds
  const Parameter& first = *z.piece_params()[0];
  ASSERT_EQ(first.grad.numel(), 2);
  EXPECT_EQ(first.grad.data<float>()[0], 4.0f + 1.0f);
  EXPECT_EQ(first.grad.data<float>()[1], 5.0f + 2.0f);
  EXPECT_EQ(cat(dev.pool().stats(), Category::gradients, false), 6 * 4);
  z.release_gradients();
  EXPECT_EQ(cat(dev.pool().stats(), Category::gradients, false), 0);
}

// A bf16 slice (--bf16-full at stage 2): the window's first micro-batch rounds its sums into the
// slice with no temporary (as stage 0 rounds its sums into the gradients); a later one adds in
// fp32 and rounds once, 1 + 1.5*2^-8 up to 1 + 2^-7 (nearest even), through an fp32 temporary of
// the piece (a plan allocates it too). After the step the rank's updated bf16 slice is
// all-gathered as 16-bit elements.
TEST(ZeroOptimizer, StageTwoRoundsEachSumOnceIntoABfloatSlice) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  for (const auto& p : ps.owned)
    p->value = Tensor::zeros(p->value.shape(), DType::bf16, Category::weights, dev);
  Idle rank1(1, 2);
  ZeroOptimizer z("sgd", ps.list, OptimizerOptions{}, 2, rank1, dev);
  z.begin_window();
  const std::vector<float> one = {0, 0, 0, 1, -3}, small = {0.005859375f, 0.005859375f};
  z.accumulate_owned(*ps.list[1], 0, one.data(), 5);    // elements 3..4 are rank 1's
  z.accumulate_owned(*ps.list[2], 0, small.data(), 2);  // and all of p2: the first micro-batch
  const Parameter& first = *z.piece_params()[0];
  ASSERT_EQ(first.grad.dtype(), DType::bf16);
  EXPECT_EQ(bf16_to_f32(first.grad.data_u16()[0]), 1.0f);
  EXPECT_EQ(cat(dev.pool().stats(), Category::temporary), 0);
  z.accumulate_owned(*ps.list[1], 3, small.data(), 2);  // the second micro-batch
  EXPECT_EQ(bf16_to_f32(first.grad.data_u16()[0]), 1.0078125f);
  EXPECT_EQ(bf16_to_f32(first.grad.data_u16()[1]), -3.0f);
  EXPECT_EQ(cat(dev.pool().stats(), Category::gradients, false), 6 * 2);
  EXPECT_EQ(cat(dev.pool().stats(), Category::temporary), 2 * 4);
  z.step(1.0f);  // sgd: w -= g on the rank's slice, then the 16-bit all-gather
  EXPECT_EQ(bf16_to_f32(ps.owned[1]->value.data_u16()[3]), -1.0078125f);
  EXPECT_EQ(rank1.gathers, 1);
}

// Optimizers whose state is not elementwise are refused at stages 1-2, naming both.
TEST(ZeroOptimizer, RefusesOptimizersThatAreNotElementwise) {
  for (const char* name : {"adafactor", "adamw_bnb_8bit", "lion_8bit", "galore_adamw", "lomo"}) {
    try {
      check_zero_optimizer(name, 2);
      ADD_FAILURE() << name << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--optim ") + name + " with --zero-stage 2"),
                std::string::npos)
          << e.what();
    }
  }
  for (const char* name : {"adamw_torch", "adamw", "sgd", "lion"})
    EXPECT_NO_THROW(check_zero_optimizer(name, 1));
}

// Stage 3 (train/zero3_params.h): 3 + 5 + 2 elements over 2 ranks, each parameter padded on its
// own to 4, 6 and 2 (slices 2, 3 and 1). Rank 1 keeps p0[2..3) and a padding element, p1[3..5)
// and one, p2[1..2): 6 elements, the values freed (shapes kept), the weights never held twice.
TEST(Zero3Parameters, PadsEachParameterAndKeepsTheRanksSlices) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  const std::vector<float> p1(ps.owned[1]->value.data<float>(),
                              ps.owned[1]->value.data<float>() + 5);
  Idle rank1(1, 2);
  const Zero3Parameters z(ps.list, rank1, dev);
  EXPECT_EQ(zero3_padded_numel(5, 2), 6);
  EXPECT_EQ(z.numel(), 10);
  EXPECT_EQ(z.padded(), 12);
  EXPECT_EQ(z.shard(), 6);
  EXPECT_EQ(z.entries()[2].offset, 5);
  const float* s = z.shards().data<float>();
  EXPECT_EQ(s[0], 0.01f * 2.0f - 0.5f);  // p0[2]
  EXPECT_EQ(s[1], 0.0f);                 // p0's padding
  EXPECT_EQ(s[2], p1[3]);
  EXPECT_EQ(s[3], p1[4]);
  EXPECT_EQ(s[4], 0.0f);  // p1's padding
  EXPECT_FALSE(ps.owned[1]->value.defined());
  EXPECT_EQ(ps.owned[1]->shape(), (Shape{5}));
  EXPECT_EQ(ps.owned[1]->numel(), 5);
  const MemoryStats m = dev.pool().stats();
  EXPECT_EQ(cat(m, Category::weights, false), 6 * 4);
  EXPECT_EQ(cat(m, Category::weights), 10 * 4);
  const std::vector<ZeroPiece> pieces = zero3_pieces(z, 1);
  ASSERT_EQ(pieces.size(), 5u);
  EXPECT_EQ(pieces[0].source, ps.owned[0].get());
  EXPECT_EQ(pieces[0].begin, 2);
  EXPECT_EQ(pieces[1].source, nullptr);
  EXPECT_EQ(pieces[1].padding_of, ps.owned[0].get());
  EXPECT_EQ(pieces[3].slice_offset, 4);
  EXPECT_EQ(pieces[4].source, ps.owned[2].get());
  EXPECT_EQ(pieces[4].slice_offset, 5);
}

// A parameter asked for twice is gathered once (one all-gather of its padded length, category
// weights) and dropped at the last release.
TEST(Zero3Parameters, GathersOncePerOutstandingRequest) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  Idle rank0(0, 2);
  Zero3Parameters z(ps.list, rank0, dev);
  Parameter& p = *ps.owned[1];
  z.acquire(p);
  z.acquire(p);
  EXPECT_EQ(rank0.gathers, 1);
  EXPECT_EQ(p.value.shape(), (Shape{5}));
  EXPECT_EQ(cat(dev.pool().stats(), Category::weights, false), (6 + 6) * 4);
  z.release(p);
  EXPECT_TRUE(p.value.defined());
  z.release(p);
  EXPECT_FALSE(p.value.defined());
  EXPECT_EQ(cat(dev.pool().stats(), Category::weights, false), 6 * 4);
  EXPECT_THROW(z.release(p), Error);
}

// A block's request: the parameters not gathered yet go in one collective (p1 is out already, p0
// is asked for twice), with the same bytes as gathering each.
TEST(Zero3Parameters, ABlocksParametersAreGatheredInOneCollective) {
  Device dev(cpu_backend());
  Params ps(dev, {3, 5, 2});
  Idle rank0(0, 2);
  Zero3Parameters z(ps.list, rank0, dev);
  z.acquire(*ps.owned[1]);
  z.acquire({ps.list[0], ps.list[1], ps.list[2], ps.list[0]});
  EXPECT_EQ(rank0.gathers, 2);
  EXPECT_EQ(rank0.parts_gathered, 2);
  EXPECT_EQ(ps.owned[0]->value.shape(), (Shape{3}));
  EXPECT_EQ(ps.owned[2]->value.shape(), (Shape{2}));
  EXPECT_EQ(cat(dev.pool().stats(), Category::weights, false), (6 + 4 + 6 + 2) * 4);
  for (int i : {0, 1, 2, 0, 1}) z.release(*ps.owned[static_cast<size_t>(i)]);
  EXPECT_FALSE(ps.owned[0]->value.defined());
  EXPECT_FALSE(ps.owned[1]->value.defined());
  EXPECT_EQ(cat(dev.pool().stats(), Category::weights, false), 6 * 4);
}

// One rank of one: the stage-3 optimizer over the shards steps as AdamW over whole parameters,
// and a gather gives the updated values.
TEST(Zero3Parameters, OneRankStepsAsThePlainOptimizer) {
  Device dev(cpu_backend());
  Params a(dev, {3, 5, 3}), b(dev, {3, 5, 3});
  OptimizerOptions o;
  o.weight_decay = 0.1f;
  const std::unique_ptr<Optimizer> plain = make_optimizer("adamw_torch", a.list, o);
  dist::SingleProcess one;
  Zero3Parameters z(b.list, one, dev);
  ZeroOptimizer zo("adamw_torch", z, o, one, dev);
  for (int step = 0; step < 3; ++step) {
    a.set_grads();
    zo.begin_window();
    z.acquire(b.list);
    b.set_grads();
    for (size_t i = 0; i < b.owned.size(); ++i) {
      zo.accumulate_owned(*b.owned[i], 0, b.owned[i]->grad.data<float>(), b.owned[i]->numel());
      b.owned[i]->free_grad();
    }
    for (Parameter* p : b.list) z.release(*p);
    plain->step(1e-2f);
    zo.step(1e-2f);
    for (Parameter* p : a.list) p->free_grad();
  }
  z.acquire(b.list);
  for (size_t i = 0; i < a.owned.size(); ++i)
    for (int64_t j = 0; j < a.owned[i]->numel(); ++j)
      EXPECT_EQ(a.owned[i]->value.data<float>()[j], b.owned[i]->value.data<float>()[j])
          << a.owned[i]->name << "[" << j << "]";
  for (Parameter* p : b.list) z.release(*p);
}

}  // namespace zero_layout_test
}  // namespace
}  // namespace snug
