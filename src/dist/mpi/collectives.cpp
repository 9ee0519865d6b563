#include "dist/mpi/collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/messages.h"
#include "dist/mpi/exchange.h"
#include "dist/mpi/runtime.h"
#include "dist/rank_order.h"
#include "dist/wait_deadline.h"

namespace snug::dist::mpi {

namespace {

// Tags: (sequence mod kTagSeqs) * 2 + phase stays below 32767, the least MPI_TAG_UB the standard
// allows.
constexpr uint64_t kTagSeqs = 16383;

template <typename T>
struct Type;
template <>
struct Type<float> {
  static MPI_Datatype get() { return MPI_FLOAT; }
};
template <>
struct Type<double> {
  static MPI_Datatype get() { return MPI_DOUBLE; }
};
template <>
struct Type<int64_t> {
  static MPI_Datatype get() { return MPI_INT64_T; }
};
template <>
struct Type<uint16_t> {
  static MPI_Datatype get() { return MPI_UINT16_T; }
};

// Rank j's place among the N-1 peers of `rank` in a scratch buffer.
size_t slot(int j, int rank) {
  return static_cast<size_t>(j < rank ? j : j - 1);
}

// One collective: phases of messages, each posted when the one before is complete.
class Collective : public PendingCollective {
 public:
  ~Collective() override { --world_.in_flight; }

  bool test() final {
    if (done_) return true;
    try {
      while (ex_.test()) {
        ++phase_;
        if (!next_phase()) {
          done_ = true;
          return true;
        }
      }
    } catch (const ExchangeError& e) {
      fail(e);
    }
    return false;
  }

  // Bounded by --ddp-timeout from the first wait: a rank may start a bucket long before it
  // waits for it (while backward runs), and its peers' messages are then already there. Only
  // the time this process runs counts (dist/wait_deadline.h).
  //
  // Messages move only while a rank is inside an MPI call, both for the sender and the
  // receiver, a shared-memory fragment at a time: so a waiting rank polls without sleeping
  // (yielding its core, as OpenMPI's own blocking calls do) as long as messages keep completing.
  // After kSpinFor without one (a peer still computing, or hung), it sleeps between polls, at
  // most kMaxNap, and spins again at the next completion. (Sleeping from the first poll made a
  // 4 MiB all-reduce on 2 ranks take 66 ms against MPI_Allreduce's 3.3 ms; polling so, 2-4 ms.)
  void wait() final {
    using Clock = std::chrono::steady_clock;
    constexpr auto kSpinFor = std::chrono::seconds(1);
    constexpr auto kFirstNap = std::chrono::microseconds(20);
    constexpr auto kMaxNap = std::chrono::microseconds(200);
    if (test()) return;
    const auto start = Clock::now();
    // Time this process did not run (stopped, then continued) is not counted.
    WaitDeadline deadline(start, world_.options.timeout_s);
    auto last_progress = start;
    size_t seen = progress();
    auto nap = kFirstNap;
    while (!test()) {
      const auto now = Clock::now();
      if (deadline.expired(now))
        abort_job(1, timeout_message(name_, seq_, world_.rank, world_.size,
                                     world_.options.timeout_s, ex_.waiting_for()));
      if (progress() != seen) {
        seen = progress();
        last_progress = now;
        nap = kFirstNap;
      }
      if (now - last_progress < kSpinFor) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, kMaxNap);
      }
    }
  }

 protected:
  Collective(World& world, const char* name)
      : world_(world),
        name_(name),
        seq_(world.next_seq++),
        ex_(world.comm, world.options.max_message_bytes) {
    ++world_.in_flight;
  }

  // Called when every message of the phase before is complete (phase_ counts them): posts the
  // next phase's messages and returns true, or returns false when the collective is done.
  virtual bool next_phase() = 0;

  // Posts the first phase (the constructors call it, turning MPI errors into snug::Error).
  template <typename F>
  void first_phase(F&& post) {
    try {
      post();
    } catch (const ExchangeError& e) {
      fail(e);
    }
  }

  int tag() const { return static_cast<int>(seq_ % kTagSeqs) * 2 + phase_; }
  // Grows with every completed message and phase.
  size_t progress() const { return ex_.completed() + static_cast<size_t>(phase_); }

  [[noreturn]] void fail(const ExchangeError& e) const {
    throw Error(collective_error_message(name_, seq_, world_.rank, world_.size, e.peer,
                                         error_string(e.code)));
  }

  World& world_;
  const char* name_;
  uint64_t seq_;
  int phase_ = 0;
  bool done_ = false;
  Exchange ex_;
};

template <typename T>
class AllReduceSum final : public Collective {
 public:
  AllReduceSum(World& world, T* data, size_t n)
      : Collective(world, "all_reduce_sum"), data_(data), n_(n) {
    const int r = world.rank, size = world.size;
    mine_ = chunk_begin(n, size, r);
    len_ = chunk_begin(n, size, r + 1) - mine_;
    scratch_.resize(static_cast<size_t>(size - 1) * len_);
    first_phase([&] {
      for (int j = 0; j < size; ++j) {
        if (j == r) continue;
        ex_.recv(scratch_.data() + slot(j, r) * len_, len_, Type<T>::get(), sizeof(T), j, tag());
        const size_t b = chunk_begin(n, size, j);
        ex_.send(data + b, chunk_begin(n, size, j + 1) - b, Type<T>::get(), sizeof(T), j, tag());
      }
    });
  }

 private:
  bool next_phase() override {
    const int r = world_.rank, size = world_.size;
    if (phase_ == 2) return false;
    std::vector<const T*> inputs(static_cast<size_t>(size));
    for (int j = 0; j < size; ++j)
      inputs[static_cast<size_t>(j)] = j == r ? data_ + mine_ : scratch_.data() + slot(j, r) * len_;
    sum_in_rank_order(inputs.data(), size, data_ + mine_, len_);
    for (int j = 0; j < size; ++j) {
      if (j == r) continue;
      const size_t b = chunk_begin(n_, size, j);
      ex_.recv(data_ + b, chunk_begin(n_, size, j + 1) - b, Type<T>::get(), sizeof(T), j, tag());
      ex_.send(data_ + mine_, len_, Type<T>::get(), sizeof(T), j, tag());
    }
    return true;
  }

  T* data_;
  size_t n_;
  size_t mine_ = 0, len_ = 0;
  std::vector<T> scratch_;
};

class ReduceScatterSum final : public Collective {
 public:
  ReduceScatterSum(World& world, const float* in, float* out, size_t shard)
      : Collective(world, "reduce_scatter_sum"), in_(in), out_(out), shard_(shard) {
    const int r = world.rank, size = world.size;
    scratch_.resize(static_cast<size_t>(size - 1) * shard);
    first_phase([&] {
      for (int j = 0; j < size; ++j) {
        if (j == r) continue;
        ex_.recv(scratch_.data() + slot(j, r) * shard, shard, MPI_FLOAT, sizeof(float), j, tag());
        ex_.send(in + static_cast<size_t>(j) * shard, shard, MPI_FLOAT, sizeof(float), j, tag());
      }
    });
  }

 private:
  bool next_phase() override {
    const int r = world_.rank, size = world_.size;
    std::vector<const float*> inputs(static_cast<size_t>(size));
    for (int j = 0; j < size; ++j)
      inputs[static_cast<size_t>(j)] =
          j == r ? in_ + static_cast<size_t>(r) * shard_ : scratch_.data() + slot(j, r) * shard_;
    sum_in_rank_order(inputs.data(), size, out_, shard_);
    return false;
  }

  const float* in_;
  float* out_;
  size_t shard_;
  std::vector<float> scratch_;
};

// All-gathers of one or more parts (all_gather: one; all_gather_many: a ZeRO-3 block's) as one
// collective. T: float, or uint16_t (16-bit weights' bits). The parts' messages between two ranks
// share one tag: MPI matches them in the order posted.
template <typename T>
class AllGather final : public Collective {
 public:
  AllGather(World& world, const std::vector<GatherPart<T>>& parts, const char* name)
      : Collective(world, name) {
    const int r = world.rank, size = world.size;
    for (const GatherPart<T>& p : parts) {
      T* own = p.out + static_cast<size_t>(r) * p.shard;
      if (own != p.in_shard && p.shard > 0) std::memcpy(own, p.in_shard, p.shard * sizeof(T));
    }
    first_phase([&] {
      for (int j = 0; j < size; ++j) {
        if (j == r) continue;
        for (const GatherPart<T>& p : parts) {
          ex_.recv(p.out + static_cast<size_t>(j) * p.shard, p.shard, Type<T>::get(), sizeof(T), j,
                   tag());
          ex_.send(p.in_shard, p.shard, Type<T>::get(), sizeof(T), j, tag());
        }
      }
    });
  }

 private:
  bool next_phase() override { return false; }
};

template <typename T>
std::unique_ptr<PendingCollective> start_gather(World& world,
                                                const std::vector<GatherPart<T>>& parts,
                                                const char* name) {
  for (const GatherPart<T>& p : parts)
    check_all_gather_buffers(p.in_shard, p.out, p.shard, world.rank, world.size);
  return std::make_unique<AllGather<T>>(world, parts, name);
}

class Broadcast final : public Collective {
 public:
  Broadcast(World& world, void* data, size_t bytes, int root) : Collective(world, "broadcast") {
    first_phase([&] {
      if (world.rank != root) {
        ex_.recv(data, bytes, MPI_BYTE, 1, root, tag());
        return;
      }
      for (int j = 0; j < world.size; ++j)
        if (j != root) ex_.send(data, bytes, MPI_BYTE, 1, j, tag());
    });
  }

 private:
  bool next_phase() override { return false; }
};

class Barrier final : public Collective {
 public:
  explicit Barrier(World& world) : Collective(world, "barrier") {
    first_phase([&] {
      for (int j = 0; j < world.size; ++j) {
        if (j == world.rank) continue;
        ex_.recv(nullptr, 0, MPI_BYTE, 1, j, tag());
        ex_.send(nullptr, 0, MPI_BYTE, 1, j, tag());
      }
    });
  }

 private:
  bool next_phase() override { return false; }
};

}  // namespace

std::unique_ptr<PendingCollective> start_all_reduce_sum(World& world, float* data, size_t n) {
  return std::make_unique<AllReduceSum<float>>(world, data, n);
}
std::unique_ptr<PendingCollective> start_all_reduce_sum(World& world, double* data, size_t n) {
  return std::make_unique<AllReduceSum<double>>(world, data, n);
}
std::unique_ptr<PendingCollective> start_all_reduce_sum(World& world, int64_t* data, size_t n) {
  return std::make_unique<AllReduceSum<int64_t>>(world, data, n);
}

std::unique_ptr<PendingCollective> start_reduce_scatter_sum(World& world, const float* in,
                                                            float* out, size_t shard) {
  check_reduce_scatter_buffers(in, out, shard, world.rank, world.size);
  return std::make_unique<ReduceScatterSum>(world, in, out, shard);
}

std::unique_ptr<PendingCollective> start_all_gather(World& world, const float* in_shard, float* out,
                                                    size_t shard) {
  return start_gather<float>(world, {{in_shard, out, shard}}, "all_gather");
}

std::unique_ptr<PendingCollective> start_all_gather(World& world, const uint16_t* in_shard,
                                                    uint16_t* out, size_t shard) {
  return start_gather<uint16_t>(world, {{in_shard, out, shard}}, "all_gather");
}

std::unique_ptr<PendingCollective> start_all_gather_many(
    World& world, const std::vector<GatherPart<float>>& parts) {
  return start_gather(world, parts, "all_gather_many");
}

std::unique_ptr<PendingCollective> start_all_gather_many(
    World& world, const std::vector<GatherPart<uint16_t>>& parts) {
  return start_gather(world, parts, "all_gather_many");
}

std::unique_ptr<PendingCollective> start_broadcast(World& world, void* data, size_t bytes,
                                                   int root) {
  check_root("broadcast", root, world.size);
  return std::make_unique<Broadcast>(world, data, bytes, root);
}

std::unique_ptr<PendingCollective> start_barrier(World& world) {
  return std::make_unique<Barrier>(world);
}

}  // namespace snug::dist::mpi
