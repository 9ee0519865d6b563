#include "dist/communicator.h"

#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <utility>

#include "core/error.h"

namespace snug::dist {

namespace {

// An incomplete Request dropped without wait(): wait here, and end the process if that fails (a
// destructor cannot throw, and the job must not go on with a collective half done).
void wait_or_terminate(std::unique_ptr<PendingCollective>& op) {
  if (op == nullptr) return;
  try {
    op->wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "snug: a collective dropped before wait() failed: %s\n", e.what());
    std::terminate();
  }
  op.reset();
}

// [a, a + n) and [b, b + m) (elements) share an element.
template <typename T>
bool overlap(const T* a, size_t n, const T* b, size_t m) {
  if (n == 0 || m == 0) return false;
  const std::less<const T*> lt;
  return lt(a, b + m) && lt(b, a + n);
}

// Several started collectives as one: complete when all are.
class AllOf final : public PendingCollective {
 public:
  explicit AllOf(std::vector<Request> parts) : parts_(std::move(parts)) {}
  bool test() override {
    bool all = true;
    for (Request& r : parts_) all = r.test() && all;
    return all;
  }
  void wait() override {
    for (Request& r : parts_) r.wait();
  }

 private:
  std::vector<Request> parts_;
};

template <typename T>
Request each_gather(Communicator& comm, const std::vector<GatherPart<T>>& parts) {
  std::vector<Request> started;
  for (const GatherPart<T>& p : parts)
    started.push_back(comm.start_all_gather(p.in_shard, p.out, p.shard));
  return Request(std::make_unique<AllOf>(std::move(started)));
}

}  // namespace

Request Communicator::start_all_gather_many(const std::vector<GatherPart<float>>& parts) {
  return each_gather(*this, parts);
}

Request Communicator::start_all_gather_many(const std::vector<GatherPart<uint16_t>>& parts) {
  return each_gather(*this, parts);
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    wait_or_terminate(op_);
    op_ = std::move(other.op_);
  }
  return *this;
}

Request::~Request() {
  wait_or_terminate(op_);
}

bool Request::test() {
  if (op_ == nullptr) return true;
  if (!op_->test()) return false;
  op_.reset();
  return true;
}

void Request::wait() {
  if (op_ == nullptr) return;
  op_->wait();
  op_.reset();
}

void check_root(std::string_view collective, int root, int size) {
  SNUG_CHECK(root >= 0 && root < size, collective, ": root rank ", root,
             " is not a rank of this world of ", size, " (0..", size - 1, ")");
}

void check_reduce_scatter_buffers(const float* in, const float* out, size_t shard, int rank,
                                  int size) {
  const size_t whole = static_cast<size_t>(size) * shard;
  SNUG_CHECK(out == in + static_cast<size_t>(rank) * shard || !overlap(in, whole, out, shard),
             "reduce_scatter_sum: the output overlaps the input other than at this rank's slice ",
             rank, " (in place, out must be in + rank*shard)");
}

namespace {

template <typename T>
void check_gather(const T* in_shard, const T* out, size_t shard, int rank, int size) {
  const size_t whole = static_cast<size_t>(size) * shard;
  SNUG_CHECK(
      in_shard == out + static_cast<size_t>(rank) * shard || !overlap(out, whole, in_shard, shard),
      "all_gather: the input overlaps the output other than at this rank's slice ", rank,
      " (in place, in_shard must be out + rank*shard)");
}

}  // namespace

void check_all_gather_buffers(const float* in_shard, const float* out, size_t shard, int rank,
                              int size) {
  check_gather(in_shard, out, shard, rank, size);
}

void check_all_gather_buffers(const uint16_t* in_shard, const uint16_t* out, size_t shard, int rank,
                              int size) {
  check_gather(in_shard, out, shard, rank, size);
}

}  // namespace snug::dist
