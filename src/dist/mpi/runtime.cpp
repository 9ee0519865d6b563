#include "dist/mpi/runtime.h"

#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace snug::dist::mpi {

namespace {
int g_users = 0;
bool g_initialized_here = false;
}  // namespace

void acquire_runtime() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  SNUG_CHECK(finalized == 0,
             "MPI was already finalized in this process: it cannot be started again (keep one "
             "communicator for the process's whole run)");
  if (initialized == 0) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    SNUG_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed: ", error_string(rc));
    g_initialized_here = true;
    SNUG_CHECK(provided >= MPI_THREAD_FUNNELED, "this MPI gives thread level ", provided,
               ", below MPI_THREAD_FUNNELED (OpenMP threads beside one MPI-calling thread)");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ++g_users;
}

void release_runtime() {
  if (g_users == 0) return;
  if (--g_users > 0 || !g_initialized_here) return;
  MPI_Finalize();
}

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

void abort_job(int code, std::string_view message) {
  std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for an MPI that would
}

}  // namespace snug::dist::mpi
