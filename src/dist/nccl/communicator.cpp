// The NCCL communicator (name "nccl"): GPU ranks, one GPU per process, NCCL's collectives on a
// stream of its own (dist/nccl_world.h; docs/distributed.md, "GPU ranks: NCCL").
//
// Ordering with the compute stream (the CUDA backend's one stream): a collective waits for an
// event recorded on the compute stream when it starts (so it sees every op queued before, the
// buffer's allocation included), runs on the communicator's stream, and records a completion
// event there. wait() polls that event, NCCL's asynchronous error and the clock: a collective not
// complete after --ddp-timeout aborts the NCCL communicator (ncclCommAbort) and ends the job
// naming the collective. Once wait() returns, ops queued afterwards on the compute stream run
// after the collective, since they are queued after it completed.
//
// Buffers in device (or managed) memory go to NCCL as they are; host buffers (the trainer's
// scalars: the window's target count, the step loss, the ranks' memory rows, the job id) are
// staged through device scratch of the communicator's stream (cudaMallocAsync, outside the
// tracked pool: a few bytes per call) and the call completes before it returns.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "core/error.h"
#include "dist/nccl/library.h"
#include "dist/nccl_world.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/cuda_backend.h"

namespace snug::dist {

namespace {

using Clock = std::chrono::steady_clock;

void check_cuda(cudaError_t e, const char* what) {
  SNUG_CHECK(e == cudaSuccess, "NCCL communicator: CUDA error in ", what, ": ", cudaGetErrorName(e),
             ": ", cudaGetErrorString(e));
}

// Device (or managed) memory NCCL can use as it is; anything else is staged.
bool on_device(const void* p) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer: host memory
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

template <typename T>
constexpr ncclDataType_t nccl_type();
template <>
constexpr ncclDataType_t nccl_type<float>() {
  return ncclFloat32;
}
template <>
constexpr ncclDataType_t nccl_type<double>() {
  return ncclFloat64;
}
template <>
constexpr ncclDataType_t nccl_type<int64_t>() {
  return ncclInt64;
}

// Device scratch on a stream, freed (stream-ordered) at scope exit.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t s) : s_(s) {
    if (bytes > 0) check_cuda(cudaMallocAsync(&p_, bytes, s), "cudaMallocAsync (staging)");
  }
  ~StreamScratch() {
    if (p_ != nullptr) (void)cudaFreeAsync(p_, s_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  cudaStream_t s_;
};

class NcclCommunicator;

class Pending final : public PendingCollective {
 public:
  Pending(NcclCommunicator& c, cudaEvent_t done, const char* what, int64_t seq)
      : c_(c), done_(done), what_(what), seq_(seq) {}
  ~Pending() override;
  bool test() override;
  void wait() override;

 private:
  NcclCommunicator& c_;
  cudaEvent_t done_;
  const char* what_;
  int64_t seq_;
  bool complete_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const CommOptions& options, int gpu, std::unique_ptr<Communicator> bootstrap)
      : options_(options), bootstrap_(std::move(bootstrap)) {
    const nccl::Api& api = nccl::api();
    rank_ = bootstrap_ ? bootstrap_->rank() : 0;
    size_ = bootstrap_ ? bootstrap_->size() : 1;
    (void)cuda_backend(gpu);  // the context and the compute stream first (and cudaSetDevice)
    ncclUniqueId id{};
    if (rank_ == 0) {
      const ncclResult_t r = api.GetUniqueId(&id);
      SNUG_CHECK(r == ncclSuccess, "NCCL: ncclGetUniqueId failed: ", nccl::describe(r));
    }
    if (bootstrap_) bootstrap_->broadcast(&id, sizeof id, 0);
    const ncclResult_t r = api.CommInitRank(&comm_, size_, id, rank_);
    SNUG_CHECK(r == ncclSuccess, "NCCL: rank ", rank_, " of ", size_, " on cuda:", gpu,
               " could not join the communicator: ", nccl::describe(r),
               r == ncclInvalidUsage
                   ? ". NCCL before 2.30 refuses two ranks on one GPU (\"Duplicate GPU "
                     "detected\"): give each rank its own GPU (--device cuda takes cuda:LOCAL_RANK "
                     "under mpirun)"
                   : "");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaMalloc(&barrier_word_, sizeof(int32_t)), "cudaMalloc (barrier word)");
  }

  // Without finish() (an error is unwinding this rank): NCCL's communicator is aborted (its
  // peers see an error or time out), and the MPI bootstrap is left unfinalized, so mpirun ends
  // every rank at once (docs/distributed.md, "Failures").
  ~NcclCommunicator() override {
    if (comm_ != nullptr) (void)nccl::api().CommAbort(comm_);
    release_cuda();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "nccl"; }

  Request start_all_reduce_sum(float* data, size_t n) override { return all_reduce(data, n); }
  Request start_all_reduce_sum(double* data, size_t n) override { return all_reduce(data, n); }
  Request start_all_reduce_sum(int64_t* data, size_t n) override { return all_reduce(data, n); }

  Request start_reduce_scatter_sum(const float* in, float* out, size_t shard) override {
    check_reduce_scatter_buffers(in, out, shard, rank_, size_);
    const char* what = "reduce_scatter_sum";
    if (shard == 0) return {};
    const size_t whole = shard * static_cast<size_t>(size_) * sizeof(float);
    const size_t part = shard * sizeof(float);
    const bool in_place = out == in + static_cast<size_t>(rank_) * shard;
    if (on_device(in) && on_device(out))
      return launch(what, [&](cudaStream_t s) {
        return nccl::api().ReduceScatter(in, out, shard, ncclFloat32, ncclSum, comm_, s);
      });
    // Staged: the input whole, the output at this rank's slice of it when in place.
    const int64_t seq = begin(what);
    StreamScratch din(whole, stream_);
    StreamScratch dout(in_place ? 0 : part, stream_);
    float* din_p = static_cast<float*>(din.get());
    float* dout_p =
        in_place ? din_p + static_cast<size_t>(rank_) * shard : static_cast<float*>(dout.get());
    copy(din_p, in, whole, cudaMemcpyDefault);
    run(what, seq, [&](cudaStream_t s) {
      return nccl::api().ReduceScatter(din_p, dout_p, shard, ncclFloat32, ncclSum, comm_, s);
    });
    copy_back(out, dout_p, part);
    return {};
  }

  Request start_all_gather(const float* in_shard, float* out, size_t shard) override {
    return all_gather(in_shard, out, shard, ncclFloat32);
  }
  // 16-bit bits are moved, never summed: any 2-byte NCCL type carries them.
  Request start_all_gather(const uint16_t* in_shard, uint16_t* out, size_t shard) override {
    return all_gather(in_shard, out, shard, ncclBfloat16);
  }

  Request start_broadcast(void* data, size_t bytes, int root) override {
    check_root("broadcast", root, size_);
    const char* what = "broadcast";
    if (bytes == 0) return {};
    if (on_device(data))
      return launch(what, [&](cudaStream_t s) {
        return nccl::api().Broadcast(data, data, bytes, ncclUint8, root, comm_, s);
      });
    const int64_t seq = begin(what);
    StreamScratch d(bytes, stream_);
    copy(d.get(), data, bytes, cudaMemcpyHostToDevice);
    run(what, seq, [&](cudaStream_t s) {
      return nccl::api().Broadcast(d.get(), d.get(), bytes, ncclUint8, root, comm_, s);
    });
    copy_back(data, d.get(), bytes);
    return {};
  }

  // NCCL has no barrier: a one-word all-reduce, waited for.
  Request start_barrier() override {
    const char* what = "barrier";
    const int64_t seq = begin(what);
    run(what, seq, [&](cudaStream_t s) {
      return nccl::api().AllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, s);
    });
    return {};
  }

  void finish() override {
    if (finished_) return;
    SNUG_CHECK(in_flight_ == 0, "NCCL communicator: finish() with ", in_flight_,
               " collective(s) still in flight");
    const nccl::Api& api = nccl::api();
    ncclResult_t r = api.CommFinalize(comm_);
    if (r == ncclSuccess) r = api.CommDestroy(comm_);
    SNUG_CHECK(r == ncclSuccess, "NCCL: ending the communicator failed on rank ", rank_, ": ",
               nccl::describe(r, comm_));
    comm_ = nullptr;
    release_cuda();
    finished_ = true;
    if (bootstrap_) bootstrap_->finish();
  }

  [[noreturn]] void abort(int code, std::string_view message) override {
    if (comm_ != nullptr) (void)nccl::api().CommAbort(comm_);
    comm_ = nullptr;
    if (bootstrap_) bootstrap_->abort(code, message);  // MPI_Abort: every rank
    std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
    std::fflush(stderr);
    std::_Exit(code);
  }

  // Blocks until `done` has completed, bounded by --ddp-timeout (see the file's comment).
  void wait_event(cudaEvent_t done, const char* what, int64_t seq) {
    const Clock::time_point start = Clock::now();
    auto pause = std::chrono::microseconds(0);
    for (;;) {
      if (poll(done, what, seq)) return;
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (waited > options_.timeout_s) timed_out(what, seq);
      // Spin briefly (a collective of a few buckets takes microseconds to milliseconds), then
      // sleep up to 0.2 ms between polls.
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
      pause = std::min(pause + std::chrono::microseconds(10), std::chrono::microseconds(200));
    }
  }

  // True once `done` completed; throws on a CUDA or NCCL error.
  bool poll(cudaEvent_t done, const char* what, int64_t seq) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady)
      throw Error(detail::concat("rank ", rank_, " of ", size_, ": ", what, " (collective ", seq,
                                 ") failed: CUDA error ", cudaGetErrorName(e), ": ",
                                 cudaGetErrorString(e)));
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = nccl::api().CommGetAsyncError(comm_, &async);
    if (r != ncclSuccess) async = r;
    if (async != ncclSuccess && async != ncclInProgress)
      throw Error(detail::concat("rank ", rank_, " of ", size_, ": ", what, " (collective ", seq,
                                 ") failed: ", nccl::describe(async, comm_)));
    return false;
  }

  void completed(cudaEvent_t done) {
    (void)cudaEventDestroy(done);
    --in_flight_;
  }

 private:
  template <typename T>
  Request all_gather(const T* in_shard, T* out, size_t shard, ncclDataType_t type) {
    check_all_gather_buffers(in_shard, out, shard, rank_, size_);
    const char* what = "all_gather";
    if (shard == 0) return {};
    const size_t whole = shard * static_cast<size_t>(size_) * sizeof(T);
    const size_t part = shard * sizeof(T);
    if (on_device(in_shard) && on_device(out))
      return launch(what, [&](cudaStream_t s) {
        return nccl::api().AllGather(in_shard, out, shard, type, comm_, s);
      });
    const int64_t seq = begin(what);
    StreamScratch dout(whole, stream_);
    T* dout_p = static_cast<T*>(dout.get());
    // The shard goes to its own slice: NCCL's in-place form.
    T* din_p = dout_p + static_cast<size_t>(rank_) * shard;
    copy(din_p, in_shard, part, cudaMemcpyDefault);
    run(what, seq, [&](cudaStream_t s) {
      return nccl::api().AllGather(din_p, dout_p, shard, type, comm_, s);
    });
    copy_back(out, dout_p, whole);
    return {};
  }

  template <typename T>
  Request all_reduce(T* data, size_t n) {
    const char* what = "all_reduce_sum";
    if (n == 0) return {};
    if (on_device(data))
      return launch(what, [&](cudaStream_t s) {
        return nccl::api().AllReduce(data, data, n, nccl_type<T>(), ncclSum, comm_, s);
      });
    const int64_t seq = begin(what);
    StreamScratch d(n * sizeof(T), stream_);
    copy(d.get(), data, n * sizeof(T), cudaMemcpyHostToDevice);
    run(what, seq, [&](cudaStream_t s) {
      return nccl::api().AllReduce(d.get(), d.get(), n, nccl_type<T>(), ncclSum, comm_, s);
    });
    copy_back(data, d.get(), n * sizeof(T));
    return {};
  }

  ncclComm_t live() const {
    SNUG_CHECK(!finished_ && comm_ != nullptr,
               "NCCL communicator: a collective after finish() or abort");
    return comm_;
  }

  // The next collective's number (1 for the first), after the communicator is checked.
  int64_t begin(const char*) {
    (void)live();
    return ++seq_;
  }

  // Queues `op` on the communicator's stream after the compute stream's work so far, and
  // records its completion event (returned).
  template <typename Op>
  cudaEvent_t enqueue(const char* what, int64_t seq, Op&& op) {
    cudaEvent_t ready = nullptr, done = nullptr;
    check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(ready, cuda::stream()), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
    (void)cudaEventDestroy(ready);
    const ncclResult_t r = op(stream_);
    SNUG_CHECK(r == ncclSuccess, "rank ", rank_, " of ", size_, ": ", what, " (collective ", seq,
               ") could not start: ", nccl::describe(r, comm_));
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(done, stream_), "cudaEventRecord");
    return done;
  }

  // Device buffers: started, completed by the Request.
  template <typename Op>
  Request launch(const char* what, Op&& op) {
    const int64_t seq = begin(what);
    cudaEvent_t done = enqueue(what, seq, op);
    ++in_flight_;
    return Request(std::make_unique<Pending>(*this, done, what, seq));
  }

  // Staged buffers: started and waited for.
  template <typename Op>
  void run(const char* what, int64_t seq, Op&& op) {
    cudaEvent_t done = enqueue(what, seq, op);
    ++in_flight_;
    try {
      wait_event(done, what, seq);
    } catch (...) {
      completed(done);
      throw;
    }
    completed(done);
  }

  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, stream_), "cudaMemcpyAsync (staging)");
  }
  // After run(): the stream has completed the collective, so this copy is all that is left.
  void copy_back(void* host_or_device, const void* scratch, size_t bytes) {
    copy(host_or_device, scratch, bytes, cudaMemcpyDefault);
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (staging)");
  }

  [[noreturn]] void timed_out(const char* what, int64_t seq) {
    const std::string message = detail::concat(
        "snug: rank ", rank_, " of ", size_, ": ", what, " (collective ", seq,
        ") did not complete within --ddp-timeout ", options_.timeout_s,
        " s (NCCL does not say which rank did not arrive); aborting the NCCL communicator and "
        "ending the job");
    abort(1, message);
  }

  void release_cuda() {
    if (barrier_word_ != nullptr) (void)cudaFree(barrier_word_);
    barrier_word_ = nullptr;
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  CommOptions options_;
  std::unique_ptr<Communicator> bootstrap_;
  int rank_ = 0;
  int size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int32_t* barrier_word_ = nullptr;
  int64_t seq_ = 0;
  int in_flight_ = 0;
  bool finished_ = false;
};

Pending::~Pending() {
  if (!complete_) c_.completed(done_);  // Request waited before dropping it, or an error
}

bool Pending::test() {
  if (complete_) return true;
  if (!c_.poll(done_, what_, seq_)) return false;
  complete_ = true;
  c_.completed(done_);
  return true;
}

void Pending::wait() {
  if (complete_) return;
  c_.wait_event(done_, what_, seq_);
  complete_ = true;
  c_.completed(done_);
}

}  // namespace

bool nccl_built() {
  return true;
}

std::string nccl_unavailable_reason() {
  if (std::string why = nccl::load_error(); !why.empty()) return why;
  if (std::string why = cuda_unavailable_reason(); !why.empty()) return "no GPU: " + why;
  return "";
}

std::unique_ptr<Communicator> make_nccl_communicator(const CommOptions& options, int gpu,
                                                     std::unique_ptr<Communicator> bootstrap) {
  return std::make_unique<NcclCommunicator>(options, gpu, std::move(bootstrap));
}

}  // namespace snug::dist
