// The MPI communicator (name "mpi"): a duplicate of MPI_COMM_WORLD and the collectives of
// collectives.h on it.
#include <memory>

#include "core/error.h"
#include "dist/mpi/collectives.h"
#include "dist/mpi/runtime.h"
#include "dist/mpi_world.h"

namespace snug::dist {

namespace {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const CommOptions& options) {
    mpi::acquire_runtime();
    world_.options = options;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &world_.comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(world_.comm, &world_.rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(world_.comm, &world_.size);
    if (rc != MPI_SUCCESS) {
      mpi::release_runtime();
      throw Error("MPI: could not make the communicator: " + mpi::error_string(rc));
    }
  }

  // Without finish() (an error is unwinding this rank's run), MPI stays initialized: the process
  // then exits without MPI_Finalize, which mpirun takes as this rank failing, and it ends every
  // rank at once instead of leaving them to wait out --ddp-timeout. The error's own message is
  // printed first by whoever catches it.
  ~MpiCommunicator() override = default;

  int rank() const override { return world_.rank; }
  int size() const override { return world_.size; }
  std::string_view name() const override { return "mpi"; }

  Request start_all_reduce_sum(float* data, size_t n) override {
    return Request(mpi::start_all_reduce_sum(live(), data, n));
  }
  Request start_all_reduce_sum(double* data, size_t n) override {
    return Request(mpi::start_all_reduce_sum(live(), data, n));
  }
  Request start_all_reduce_sum(int64_t* data, size_t n) override {
    return Request(mpi::start_all_reduce_sum(live(), data, n));
  }
  Request start_reduce_scatter_sum(const float* in, float* out, size_t shard) override {
    return Request(mpi::start_reduce_scatter_sum(live(), in, out, shard));
  }
  Request start_all_gather(const float* in_shard, float* out, size_t shard) override {
    return Request(mpi::start_all_gather(live(), in_shard, out, shard));
  }
  Request start_all_gather(const uint16_t* in_shard, uint16_t* out, size_t shard) override {
    return Request(mpi::start_all_gather(live(), in_shard, out, shard));
  }
  Request start_all_gather_many(const std::vector<GatherPart<float>>& parts) override {
    return Request(mpi::start_all_gather_many(live(), parts));
  }
  Request start_all_gather_many(const std::vector<GatherPart<uint16_t>>& parts) override {
    return Request(mpi::start_all_gather_many(live(), parts));
  }
  Request start_broadcast(void* data, size_t bytes, int root) override {
    return Request(mpi::start_broadcast(live(), data, bytes, root));
  }
  Request start_barrier() override { return Request(mpi::start_barrier(live())); }

  void finish() override {
    if (finished_) return;
    SNUG_CHECK(world_.in_flight == 0, "MPI communicator: finish() with ", world_.in_flight,
               " collective(s) started and not waited for");
    MPI_Comm_free(&world_.comm);
    finished_ = true;
    mpi::release_runtime();
  }

  [[noreturn]] void abort(int code, std::string_view message) override {
    mpi::abort_job(code, message);
  }

 private:
  mpi::World& live() {
    SNUG_CHECK(!finished_, "MPI communicator: a collective after finish()");
    return world_;
  }

  mpi::World world_;
  bool finished_ = false;
};

}  // namespace

bool mpi_built() {
  return true;
}

std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& options) {
  return std::make_unique<MpiCommunicator>(options);
}

}  // namespace snug::dist
