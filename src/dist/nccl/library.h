// libnccl.so.2 loaded at run time (dlopen), the functions the communicator calls taken from it
// by name. The types come from nccl.h (the build's NCCL 2.x: its ABI is stable within 2.x);
// nothing links against the library, so snug's binaries start on a machine without it.
#pragma once

#include <nccl.h>

#include <string>

namespace snug::dist::nccl {

struct Api {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  int version = 0;   // ncclGetVersion's code: 22809 for 2.28.9
  std::string path;  // what was loaded
};

// The library, loaded on first use from SNUG_NCCL_LIBRARY when set, else libnccl.so.2 on the
// loader's path, else beside the library the build found (SNUG_NCCL_HINT). Throws snug::Error
// naming every path tried and dlerror()'s reason.
const Api& api();
// "" when api() would succeed, else its message.
std::string load_error();

// "ncclInvalidUsage: invalid usage (run with NCCL_DEBUG=WARN for details)" plus NCCL's last
// error message for `comm` when it has one.
std::string describe(ncclResult_t r, ncclComm_t comm = nullptr);

}  // namespace snug::dist::nccl
