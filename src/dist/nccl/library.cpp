#include "dist/nccl/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace snug::dist::nccl {

namespace {

struct Loaded {
  Api api;
  std::string error;
};

template <typename F>
bool take(void* lib, const char* symbol, F& out, std::string& error) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  if (out == nullptr && error.empty()) error = detail::concat("it has no ", symbol);
  return out != nullptr;
}

Loaded load() {
  Loaded l;
  std::vector<std::string> paths;
  if (const char* env = std::getenv("SNUG_NCCL_LIBRARY"); env != nullptr && *env != '\0')
    paths.emplace_back(env);
  paths.emplace_back("libnccl.so.2");
#ifdef SNUG_NCCL_HINT
  paths.emplace_back(SNUG_NCCL_HINT);
#endif
  std::string tried;
  for (const std::string& p : paths) {
    void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      tried += detail::concat(tried.empty() ? "" : "; ", p, ": ", why ? why : "not found");
      continue;
    }
    std::string error;
    Api& a = l.api;
    take(lib, "ncclGetVersion", a.GetVersion, error);
    take(lib, "ncclGetUniqueId", a.GetUniqueId, error);
    take(lib, "ncclCommInitRank", a.CommInitRank, error);
    take(lib, "ncclCommFinalize", a.CommFinalize, error);
    take(lib, "ncclCommDestroy", a.CommDestroy, error);
    take(lib, "ncclCommAbort", a.CommAbort, error);
    take(lib, "ncclCommGetAsyncError", a.CommGetAsyncError, error);
    take(lib, "ncclGetErrorString", a.GetErrorString, error);
    take(lib, "ncclGetLastError", a.GetLastError, error);
    take(lib, "ncclAllReduce", a.AllReduce, error);
    take(lib, "ncclReduceScatter", a.ReduceScatter, error);
    take(lib, "ncclAllGather", a.AllGather, error);
    take(lib, "ncclBroadcast", a.Broadcast, error);
    if (error.empty() && a.GetVersion(&a.version) != ncclSuccess) error = "ncclGetVersion failed";
    if (error.empty() && a.version / 10000 != NCCL_MAJOR)
      error = detail::concat("it is NCCL ", a.version, ", not ", NCCL_MAJOR, ".x as built against");
    if (!error.empty()) {
      tried += detail::concat(tried.empty() ? "" : "; ", p, ": ", error);
      dlclose(lib);
      l.api = Api{};
      continue;
    }
    a.path = p;  // kept open for the life of the process
    return l;
  }
  l.error = detail::concat("NCCL could not be loaded (", tried,
                           "); install NCCL for CUDA 13 (libnccl2) or name the library with "
                           "SNUG_NCCL_LIBRARY=/path/libnccl.so.2");
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Api& api() {
  const Loaded& l = loaded();
  SNUG_CHECK(l.error.empty(), l.error);
  return l.api;
}

std::string load_error() {
  return loaded().error;
}

std::string describe(ncclResult_t r, ncclComm_t comm) {
  const Api& a = api();
  std::string s;
  switch (r) {
    case ncclSuccess:
      s = "ncclSuccess";
      break;
    case ncclUnhandledCudaError:
      s = "ncclUnhandledCudaError";
      break;
    case ncclSystemError:
      s = "ncclSystemError";
      break;
    case ncclInternalError:
      s = "ncclInternalError";
      break;
    case ncclInvalidArgument:
      s = "ncclInvalidArgument";
      break;
    case ncclInvalidUsage:
      s = "ncclInvalidUsage";
      break;
    case ncclRemoteError:
      s = "ncclRemoteError";
      break;
    case ncclInProgress:
      s = "ncclInProgress";
      break;
    default:
      s = detail::concat("ncclResult ", static_cast<int>(r));
      break;
  }
  s += detail::concat(": ", a.GetErrorString(r));
  const char* last = a.GetLastError(comm);
  if (last != nullptr && *last != '\0') s += detail::concat(" (", last, ")");
  return s;
}

}  // namespace snug::dist::nccl
