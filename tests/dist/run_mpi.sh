#!/bin/sh
# Runs a program under `mpirun -np N` for CTest (label mpi): run_mpi.sh N PROGRAM [ARGS...].
# The mpirun is $SNUG_MPIRUN (CMake's MPIEXEC_EXECUTABLE) or the one on PATH; without one the
# test is skipped with the reason (exit 77, SKIP_RETURN_CODE). --oversubscribe: more ranks than
# cores is fine for a test; --bind-to none: the ranks share the cores with OpenMP threads. The
# environment (tests/CMakeLists.txt) lets OpenMPI run as root in a container.
np="$1"
shift
mpirun="${SNUG_MPIRUN:-}"
[ -n "$mpirun" ] && [ -x "$mpirun" ] || mpirun="$(command -v mpirun 2>/dev/null)"
if [ -z "$mpirun" ]; then
  echo "SNUG_MPI_SKIP: mpirun not found (install openmpi-bin: scripts/install-deps.sh)"
  exit 77
fi
exec "$mpirun" -np "$np" --oversubscribe --bind-to none "$@"
