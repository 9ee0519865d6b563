// The MPI communicator's entry points. Nothing here includes <mpi.h>: a build without MPI
// (SNUG_MPI off, or no MPI found) links mpi_absent.cpp instead of dist/mpi/, whose functions say
// so, and the rest of snug builds the same.
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace snug::dist {

// True when this snug was built with MPI.
bool mpi_built();

// This process's rank of MPI_COMM_WORLD as a Communicator (name "mpi"). The first one made in a
// process initializes MPI (MPI_Init_thread, FUNNELED: only the thread that made it calls MPI);
// MPI is finalized when the last one is finish()ed. A communicator destroyed without finish()
// leaves MPI open, so the process exits without MPI_Finalize and mpirun ends the whole job,
// naming the rank. Every rank makes its communicators in the same order (each is a duplicate of
// the world, a collective call). Throws snug::Error without MPI, or when MPI was
// already finalized in this process.
std::unique_ptr<Communicator> make_mpi_communicator(const CommOptions& options);

}  // namespace snug::dist
