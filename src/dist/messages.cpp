#include "dist/messages.h"

#include <sstream>

namespace snug::dist {

namespace {

std::string head(std::string_view collective, uint64_t seq, int rank, int size) {
  std::ostringstream os;
  os << "rank " << rank << " of " << size << ": " << collective << " (collective " << seq << ")";
  return os.str();
}

}  // namespace

std::string timeout_message(std::string_view collective, uint64_t seq, int rank, int size,
                            double timeout_s, const std::vector<int>& missing) {
  std::ostringstream os;
  os << "snug: " << head(collective, seq, rank, size) << " did not complete within --ddp-timeout "
     << timeout_s << " s: ";
  if (missing.empty()) {
    os << "every rank's data arrived, yet the exchange did not complete";
  } else {
    os << (missing.size() == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < missing.size(); ++i) os << (i == 0 ? "" : ", ") << missing[i];
    os << " did not arrive";
  }
  os << "; ending the job";
  return os.str();
}

std::string collective_error_message(std::string_view collective, uint64_t seq, int rank, int size,
                                     int peer, std::string_view what) {
  std::ostringstream os;
  os << head(collective, seq, rank, size) << " failed";
  if (peer >= 0) os << " with rank " << peer;
  os << ": " << what;
  return os.str();
}

}  // namespace snug::dist
