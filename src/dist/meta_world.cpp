#include "dist/meta_world.h"

#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace snug::dist {

MetaWorld::MetaWorld(int rank, int size) : rank_(rank), size_(size) {
  SNUG_CHECK(size >= 1, "a world of ", size, " ranks: it needs at least one");
  SNUG_CHECK(rank >= 0 && rank < size, "rank ", rank, " is outside a world of ", size);
}

// Meta tensors have no addresses (null), so the buffers' overlap is not checked.
Request MetaWorld::start_reduce_scatter_sum(const float*, float*, size_t) {
  return {};
}

Request MetaWorld::start_all_gather(const float*, float*, size_t) {
  return {};
}

Request MetaWorld::start_all_gather(const uint16_t*, uint16_t*, size_t) {
  return {};
}

Request MetaWorld::start_broadcast(void*, size_t, int root) {
  check_root("broadcast", root, size_);
  return {};
}

void MetaWorld::abort(int code, std::string_view message) {
  std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace snug::dist
