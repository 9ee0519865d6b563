// The world the MPI tests (*_mpitest.cpp) run on: mpi_test_main.cpp makes it under mpirun and
// keeps it for the whole run, so that MPI stays initialized while tests make more communicators.
#pragma once

#include "dist/communicator.h"

namespace snug::dist::testing_mpi {

Communicator& world();

}  // namespace snug::dist::testing_mpi
