// A set of point-to-point messages in flight, each with the peer rank it goes to or comes from.
// The collectives (collectives.h) are built of these rather than of MPI's own collectives, for
// two reasons: the reduction order stays ours (rank order, dist/rank_order.h), and when a
// collective times out, the receives still open name exactly the ranks that did not arrive.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

namespace snug::dist::mpi {

// An MPI call or a completed message reported an error.
struct ExchangeError {
  int peer;  // the rank the failed message was with; -1 when none
  int code;  // MPI's error code
};

class Exchange {
 public:
  // Messages larger than max_message_bytes go as several (same tag: MPI keeps their order).
  Exchange(MPI_Comm comm, size_t max_message_bytes);
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  // Cancels and frees what is still open (the job is ending, or a collective failed).
  ~Exchange();

  // count elements of `type` (type_bytes each); always at least one message, so that a zero-size
  // exchange (a barrier) still needs the peer. Throws ExchangeError.
  void send(const void* data, size_t count, MPI_Datatype type, size_t type_bytes, int peer,
            int tag);
  void recv(void* data, size_t count, MPI_Datatype type, size_t type_bytes, int peer, int tag);

  // Advances; true when every message posted so far is complete. Throws ExchangeError.
  bool test();
  // Messages completed so far (a waiting rank's sign of progress).
  size_t completed() const { return completed_; }
  // The ranks not heard from: the peers of receives not yet complete (sorted, once each), or
  // with every receive complete, the peers of sends not yet taken.
  std::vector<int> waiting_for() const;

 private:
  void post(bool is_recv, void* data, size_t count, MPI_Datatype type, size_t type_bytes, int peer,
            int tag);

  MPI_Comm comm_;
  size_t max_message_bytes_;
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;
  std::vector<char> is_recv_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  size_t open_ = 0;
  size_t completed_ = 0;
};

}  // namespace snug::dist::mpi
