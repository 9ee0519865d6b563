// MPI itself, once per process: initialized by the first communicator, finalized after the last
// one finishes, and the calls every MPI source file shares (errors into words, ending the job).
// Only dist/mpi/ includes <mpi.h>.
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>

namespace snug::dist::mpi {

// MPI_Init_thread (FUNNELED) on the first call, errors returned (MPI_ERRORS_RETURN) on
// MPI_COMM_WORLD; throws snug::Error when MPI was finalized already or the thread level is short.
void acquire_runtime();
// MPI_Finalize after the last acquire_runtime's release (when this process initialized MPI).
void release_runtime();

// MPI's words for an error code: "MPI_ERR_TRUNCATE: message truncated".
std::string error_string(int code);

// `message` on stderr, then MPI_Abort on MPI_COMM_WORLD: mpirun ends every rank.
[[noreturn]] void abort_job(int code, std::string_view message);

}  // namespace snug::dist::mpi
