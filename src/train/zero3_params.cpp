#include "train/zero3_params.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "nn/construction_partition.h"

namespace snug {

namespace {

// The elements of parameter e in rank r's slice that are values: [first, last) (past last, to the
// slice's end, padding).
std::pair<int64_t, int64_t> values_in_slice(const Zero3Entry& e, int r) {
  return {std::min(e.numel, r * e.shard), std::min(e.numel, (r + 1) * e.shard)};
}

}  // namespace

int64_t zero3_padded_numel(int64_t numel, int world) {
  return (numel + world - 1) / world * world;
}

std::vector<Zero3Entry> zero3_layout(const ParameterList& params, int world) {
  std::vector<Zero3Entry> out;
  int64_t offset = 0;
  for (Parameter* p : params) {
    if (!p->requires_grad || p->quantized()) continue;
    const DType dt = p->dtype();
    SNUG_CHECK(dt == DType::f32 || dt == DType::bf16, "--zero-stage 3: parameter ", p->name, " is ",
               dtype_name(dt), "; ZeRO stage 3 partitions fp32 or bf16 trainable parameters only");
    SNUG_CHECK(out.empty() || dt == out.front().p->dtype(), "--zero-stage 3: parameter ", p->name,
               " is ", dtype_name(dt), " and ", out.front().p->name, " is ",
               dtype_name(out.front().p->dtype()), "; the shards hold one dtype");
    Zero3Entry e;
    e.p = p;
    e.shape = p->shape();
    e.numel = p->numel();
    e.padded = zero3_padded_numel(e.numel, world);
    e.shard = e.padded / world;
    e.offset = offset;
    offset += e.shard;
    out.push_back(e);
  }
  SNUG_CHECK(!out.empty(), "--zero-stage 3: no parameter trains");
  return out;
}

Zero3Parameters::Zero3Parameters(const ParameterList& params, dist::Communicator& comm, Device& dev,
                                 Device* home)
    : comm_(comm), dev_(dev), home_(home != nullptr ? *home : dev), world_(comm.size()) {
  const int r = comm.rank();
  entries_ = zero3_layout(params, world_);
  dtype_ = entries_.front().p->dtype();
  bool built_partitioned = false;
  for (const Zero3Entry& e : entries_) {
    index_[e.p] = static_cast<size_t>(&e - entries_.data());
    numel_ += e.numel;
    padded_ += e.padded;
    shard_ += e.shard;
    built_partitioned = built_partitioned || e.p->sliced();
  }
  count_.assign(entries_.size(), 0);
  const bool real = !dev.is_meta();
  const auto es = static_cast<int64_t>(dtype_size(dtype_));
  const nn::ConstructionPartition* cp = nn::ConstructionPartition::current();
  if (cp != nullptr || built_partitioned) {
    // Built inside a nn::ConstructionPartition (train/zero3_init.h): its shards are ours, the
    // parameters partitioned at construction already in their slices; those made whole after it
    // (LoRA adapters: in a LoRA run all of them) copy their slices in.
    SNUG_CHECK(cp != nullptr && cp->shards().numel() == shard_ && cp->shards().dtype() == dtype_ &&
                   &cp->shards().device() == &home_,
               "--zero-stage 3: the model was partitioned at construction for another layout "
               "than this run's (its trainable parameters, their dtype or where the shards live)");
    shards_ = cp->shards();
    auto* base = static_cast<unsigned char*>(shards_.raw());
    for (const Zero3Entry& e : entries_) {
      Parameter& p = *e.p;
      if (!p.value.defined()) {
        SNUG_CHECK(p.shard.defined() && (!real || p.shard.raw() == base + e.offset * es) &&
                       p.shard_begin == r * e.shard,
                   "--zero-stage 3: parameter ", p.name,
                   " was partitioned at construction into another slice than this run's");
        continue;
      }
      const auto [a, b] = values_in_slice(e, r);
      if (real && a < b) {
        const auto* from = static_cast<const unsigned char*>(p.value.raw()) + a * es;
        if (offloaded())
          dev.download(base + e.offset * es, from, (b - a) * es);  // into the host pool
        else
          dev.copy(base + e.offset * es, from, (b - a) * es);
      }
      p.partitioned = std::make_shared<const Shape>(e.shape);
      p.shard = shards_.slice_rows(e.offset, e.offset + e.shard);
      p.shard_begin = r * e.shard;
      p.value.reset();
    }
    return;
  }
  // The rank's slices staged in host memory, the whole values freed, then the shards made: the
  // tracked weights never hold a parameter twice (on meta there is nothing to stage).
  std::vector<unsigned char> staged(real ? static_cast<size_t>(shard_ * es) : 0, 0);
  for (const Zero3Entry& e : entries_) {
    const auto [a, b] = values_in_slice(e, r);
    if (real && a < b)
      dev.download(staged.data() + e.offset * es,
                   static_cast<const unsigned char*>(e.p->value.raw()) + a * es, (b - a) * es);
    e.p->partitioned = std::make_shared<const Shape>(e.shape);
    e.p->value.reset();
  }
  shards_ = Tensor::empty({shard_}, dtype_, Category::weights, home_);
  if (real) home_.upload(static_cast<unsigned char*>(shards_.raw()), staged.data(), shard_ * es);
  for (const Zero3Entry& e : entries_) {
    e.p->shard = shards_.slice_rows(e.offset, e.offset + e.shard);
    e.p->shard_begin = r * e.shard;
  }
}

Zero3Parameters::~Zero3Parameters() = default;

const Zero3Entry* Zero3Parameters::entry(const Parameter& p) const {
  const auto it = index_.find(&p);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void Zero3Parameters::gather(const std::vector<const Zero3Entry*>& es) {
  // Each whole tensor allocated in turn (as one acquire() after another would), then one
  // collective for all of them.
  std::vector<Tensor> whole;
  for (const Zero3Entry* e : es)
    whole.push_back(Tensor::empty({e->padded}, dtype_, Category::weights, dev_));
  if (!dev_.is_meta() && !es.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto bytes = static_cast<int64_t>(dtype_size(dtype_));
    // Over ranks: the parts in the shards' dtype (16-bit weights' bits, or fp32).
    const auto from_ranks = [&](auto* shards) {
      using T = std::remove_pointer_t<decltype(shards)>;
      std::vector<dist::GatherPart<T>> parts;
      for (size_t i = 0; i < es.size(); ++i)
        parts.push_back({shards + es[i]->offset, static_cast<T*>(whole[i].raw()),
                         static_cast<size_t>(es[i]->shard)});
      if (parts.size() == 1)
        comm_.all_gather(parts[0].in_shard, parts[0].out, parts[0].shard);
      else
        comm_.start_all_gather_many(parts).wait();
    };
    if (world_ > 1 && dtype_ == DType::bf16) {
      from_ranks(shards_.data_u16());
    } else if (world_ > 1) {
      from_ranks(shards_.data<float>());
    } else {
      for (size_t i = 0; i < es.size(); ++i) {
        auto* to = static_cast<unsigned char*>(whole[i].raw());
        const auto* from = static_cast<const unsigned char*>(shards_.raw()) + es[i]->offset * bytes;
        if (offloaded())
          dev_.upload(to, from, es[i]->shard * bytes);  // from the host pool
        else
          dev_.copy(to, from, es[i]->shard * bytes);
      }
    }
    gather_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  for (size_t i = 0; i < es.size(); ++i)
    es[i]->p->value = whole[i].slice_rows(0, es[i]->numel).view(es[i]->shape);
}

void Zero3Parameters::acquire(Parameter& p) {
  const auto it = index_.find(&p);
  if (it == index_.end()) return;  // whole on every rank
  if (count_[it->second]++ == 0) gather({&entries_[it->second]});
}

void Zero3Parameters::acquire(const std::vector<Parameter*>& ps) {
  std::vector<const Zero3Entry*> fresh;
  for (Parameter* p : ps) {
    const auto it = index_.find(p);
    if (it != index_.end() && count_[it->second]++ == 0) fresh.push_back(&entries_[it->second]);
  }
  gather(fresh);
}

void Zero3Parameters::release(Parameter& p) {
  const auto it = index_.find(&p);
  if (it == index_.end()) return;
  int& n = count_[it->second];
  SNUG_ASSERT(n > 0, "ZeRO stage 3: parameter ", p.name, " released more often than gathered");
  if (--n == 0) p.value.reset();
}

}  // namespace snug
