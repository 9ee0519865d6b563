// The communication layer between ranks (issue 30; docs/distributed.md): what data parallelism
// and ZeRO need from the processes of one job, behind one interface.
//
//   SingleProcess   a world of one: every collective is a copy or nothing (dist/single_process.h)
//   MPI             CPU ranks launched by mpirun (OpenMPI), built when CMake finds MPI
//                   (dist/mpi_world.h)
//   NCCL            GPU ranks, bootstrapped over MPI or a world of one (dist/nccl_world.h); its
//                   sums are NCCL's order, not rank order (docs/distributed.md, "GPU ranks")
//
// make_communicator (dist/make_communicator.h) picks one from how the process was launched.
//
// Contracts every implementation keeps:
//  - Sums are deterministic and bit-identical on every rank: element i of a sum over N ranks is
//    x_0[i] + x_1[i] + ... + x_{N-1}[i], added left to right in rank order in the element's type
//    (no tree, no timing-dependent order). So a run is reproducible for a given N, and a test can
//    compute the expected bits itself.
//  - The DeepSpeed flat layout: reduce_scatter_sum's input is N*shard elements, slice r
//    ([r*shard, (r+1)*shard)) is rank r's; all_gather is its inverse.
//  - Every collective is bounded by CommOptions::timeout_s (--ddp-timeout): a rank whose peers do
//    not arrive in time prints which ranks it waited for and ends the whole job (a hung rank
//    cannot be recovered from in MPI 4, so waiting longer only hides it).
//  - Every rank calls the same collectives in the same order with the same sizes (as MPI asks).
//
// Asynchronous forms (start_*) return a Request that the caller completes with wait(); test()
// advances it without blocking. A bucket of gradients can so be started while backward still
// runs and waited for at the step. The buffers belong to the collective until it completes.
// OpenMPI advances messages only inside MPI calls (no progress thread in 4.x), so a caller that
// wants overlap calls test() between chunks of compute (after each layer's backward).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace snug::dist {

// HF TrainingArguments' ddp_timeout default: 30 minutes.
constexpr double kDefaultTimeoutSeconds = 1800;

struct CommOptions {
  // --ddp-timeout: the longest a collective waits for its peers, in seconds (> 0).
  double timeout_s = kDefaultTimeoutSeconds;
  // The largest single message (bytes); a larger buffer goes as several messages, so that a
  // waiting rank sees messages complete (and MPI's int counts are never at risk). Tests lower it
  // to cover the split.
  size_t max_message_bytes = size_t{16} << 20;
};

// A collective in flight (the implementation's side of a Request).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  // Advances without blocking; true once complete.
  virtual bool test() = 0;
  // Blocks until complete, bounded by the timeout (which ends the job).
  virtual void wait() = 0;
};

// One all-gather of several (Communicator::start_all_gather_many): out (size()*shard elements)
// gets slice r = rank r's in_shard.
template <typename T>
struct GatherPart {
  const T* in_shard;
  T* out;
  size_t shard;
};

// A started collective. Default-constructed: already complete. Move-only; destroying or
// overwriting an incomplete Request waits for it (its buffers are still in use), so wait() before
// dropping one: an error while waiting in a destructor ends the process.
class Request {
 public:
  Request() = default;
  explicit Request(std::unique_ptr<PendingCollective> op) : op_(std::move(op)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  bool test();
  void wait();
  bool done() const { return op_ == nullptr; }

 private:
  std::unique_ptr<PendingCollective> op_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "single", "mpi" or "nccl".
  virtual std::string_view name() const = 0;

  // In place: data[i] becomes the rank-ordered sum of every rank's data[i] (n elements).
  virtual Request start_all_reduce_sum(float* data, size_t n) = 0;
  virtual Request start_all_reduce_sum(double* data, size_t n) = 0;
  virtual Request start_all_reduce_sum(int64_t* data, size_t n) = 0;
  // in: size()*shard elements; out (shard elements) gets the rank-ordered sum of every rank's
  // slice rank(). out is disjoint from in or is exactly in + rank()*shard (in place).
  virtual Request start_reduce_scatter_sum(const float* in, float* out, size_t shard) = 0;
  // out (size()*shard elements): slice r is rank r's in_shard. in_shard is disjoint from out or
  // is exactly out + rank()*shard (in place).
  virtual Request start_all_gather(const float* in_shard, float* out, size_t shard) = 0;
  // The same for 16-bit elements (bf16 or fp16 bits, moved as they are): ZeRO's flat bf16
  // weights and stage 3's bf16 shards (--bf16-full, --precision-layout deepspeed).
  virtual Request start_all_gather(const uint16_t* in_shard, uint16_t* out, size_t shard) = 0;
  // Several all-gathers as one collective (ZeRO stage 3 gathers a block's parameters together):
  // one meeting of the ranks instead of one per part. Each part as start_all_gather; the parts'
  // buffers are disjoint. By default the parts' own all-gathers, completed together.
  virtual Request start_all_gather_many(const std::vector<GatherPart<float>>& parts);
  virtual Request start_all_gather_many(const std::vector<GatherPart<uint16_t>>& parts);
  // root's `bytes` bytes at data are copied to every rank's data.
  virtual Request start_broadcast(void* data, size_t bytes, int root) = 0;
  // Completes on a rank once every rank has started it.
  virtual Request start_barrier() = 0;

  // A clean end: after it, the communicator takes no more collectives (MPI: the last one
  // finalizes MPI). An MPI communicator destroyed without finish() (an error left the run early)
  // leaves MPI unfinalized, and a process that exits so is a failed rank to mpirun, which ends
  // every rank at once: the others never wait for one that has gone.
  virtual void finish() = 0;
  // Ends every rank's process now: `message` on stderr, exit status `code`.
  [[noreturn]] virtual void abort(int code, std::string_view message) = 0;

  // The blocking forms: start and wait.
  void all_reduce_sum(float* data, size_t n) { start_all_reduce_sum(data, n).wait(); }
  void all_reduce_sum(double* data, size_t n) { start_all_reduce_sum(data, n).wait(); }
  void all_reduce_sum(int64_t* data, size_t n) { start_all_reduce_sum(data, n).wait(); }
  void reduce_scatter_sum(const float* in, float* out, size_t shard) {
    start_reduce_scatter_sum(in, out, shard).wait();
  }
  void all_gather(const float* in_shard, float* out, size_t shard) {
    start_all_gather(in_shard, out, shard).wait();
  }
  void all_gather(const uint16_t* in_shard, uint16_t* out, size_t shard) {
    start_all_gather(in_shard, out, shard).wait();
  }
  void broadcast(void* data, size_t bytes, int root) { start_broadcast(data, bytes, root).wait(); }
  void barrier() { start_barrier().wait(); }
};

// The checks every implementation makes of a call's arguments (snug::Error naming the call).
void check_root(std::string_view collective, int root, int size);
// out is disjoint from [in, in + size*shard) or equals in + rank*shard.
void check_reduce_scatter_buffers(const float* in, const float* out, size_t shard, int rank,
                                  int size);
// in_shard is disjoint from [out, out + size*shard) or equals out + rank*shard.
void check_all_gather_buffers(const float* in_shard, const float* out, size_t shard, int rank,
                              int size);
void check_all_gather_buffers(const uint16_t* in_shard, const uint16_t* out, size_t shard, int rank,
                              int size);

}  // namespace snug::dist
