#include "dist/mpi/exchange.h"

#include <algorithm>
#include <climits>

namespace snug::dist::mpi {

Exchange::Exchange(MPI_Comm comm, size_t max_message_bytes)
    : comm_(comm), max_message_bytes_(max_message_bytes) {}

Exchange::~Exchange() {
  for (MPI_Request& r : requests_) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);
    MPI_Request_free(&r);
  }
}

void Exchange::send(const void* data, size_t count, MPI_Datatype type, size_t type_bytes, int peer,
                    int tag) {
  post(false, const_cast<void*>(data), count, type, type_bytes, peer, tag);
}

void Exchange::recv(void* data, size_t count, MPI_Datatype type, size_t type_bytes, int peer,
                    int tag) {
  post(true, data, count, type, type_bytes, peer, tag);
}

void Exchange::post(bool is_recv, void* data, size_t count, MPI_Datatype type, size_t type_bytes,
                    int peer, int tag) {
  const size_t per = std::clamp<size_t>(max_message_bytes_ / type_bytes, 1, INT_MAX);
  char* p = static_cast<char*>(data);
  size_t left = count;
  do {
    const size_t m = std::min(left, per);
    MPI_Request r = MPI_REQUEST_NULL;
    const int rc = is_recv ? MPI_Irecv(p, static_cast<int>(m), type, peer, tag, comm_, &r)
                           : MPI_Isend(p, static_cast<int>(m), type, peer, tag, comm_, &r);
    if (rc != MPI_SUCCESS) throw ExchangeError{peer, rc};
    requests_.push_back(r);
    peers_.push_back(peer);
    is_recv_.push_back(is_recv ? 1 : 0);
    ++open_;
    p += m * type_bytes;
    left -= m;
  } while (left > 0);
}

bool Exchange::test() {
  if (open_ == 0) return true;
  indices_.resize(requests_.size());
  statuses_.resize(requests_.size());
  int completed = 0;
  const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &completed,
                              indices_.data(), statuses_.data());
  if (rc == MPI_ERR_IN_STATUS) {
    for (int k = 0; k < completed; ++k)
      if (statuses_[static_cast<size_t>(k)].MPI_ERROR != MPI_SUCCESS)
        throw ExchangeError{peers_[static_cast<size_t>(indices_[static_cast<size_t>(k)])],
                            statuses_[static_cast<size_t>(k)].MPI_ERROR};
  }
  if (rc != MPI_SUCCESS) throw ExchangeError{-1, rc};
  if (completed != MPI_UNDEFINED) {
    open_ -= static_cast<size_t>(completed);
    completed_ += static_cast<size_t>(completed);
  }
  if (open_ > 0) return false;
  requests_.clear();
  peers_.clear();
  is_recv_.clear();
  return true;
}

std::vector<int> Exchange::waiting_for() const {
  std::vector<int> out;
  // The open receives name who did not send; with none open, the open sends name who did not
  // take delivery.
  for (char want_recv : {char{1}, char{0}}) {
    for (size_t i = 0; i < requests_.size(); ++i)
      if (is_recv_[i] == want_recv && requests_[i] != MPI_REQUEST_NULL) out.push_back(peers_[i]);
    if (!out.empty()) break;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace snug::dist::mpi
