#pragma once
// The OpenMP wait policy of the snug executable when the environment names none.
//
// libgomp's default lets a waiting thread spin for up to 300000 iterations before it sleeps.
// On an idle machine that is what makes small kernels fast: `snug train --max-steps 200`
// (gpt2-tiny) ran in 4.4 s spinning, 6.6 s with OMP_WAIT_POLICY=PASSIVE and 6.9 s on one thread.
// On a machine that also runs anything else, the thread that should do the work is descheduled
// while its partner spins at a barrier: 15.2 s spinning against 8.0 s passive and 7.9 s on one
// thread, beside one busy process (AMD EPYC family 26, 2 cores; issue 26 measured 119 s against
// 33 s on a busy AVX2 host). No fixed spin count serves both (1000: 10.5 s busy; 30000: 5.6 s
// idle). So snug looks before it starts: when the tasks already runnable plus its own threads
// exceed the CPUs it may use, waiting threads sleep (PASSIVE); otherwise the runtime's default
// stands. A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT always wins; `snug info` and the
// report's system.omp_wait_policy say which is in force. docs/benchmarks.md has the figures.
namespace snug::cli {

inline constexpr const char* kBusyOmpWaitPolicy = "PASSIVE";

// Tasks runnable right now besides this process (/proc/stat's procs_running, the median of a
// few samples over 8 ms); -1 when /proc/stat cannot be read.
int other_runnable_tasks();

// Whether spinning threads would take CPU time another task is waiting for: fewer CPUs than
// the runnable tasks plus this run's threads. False when other_runnable is unknown (-1).
bool spinning_would_steal(int other_runnable, int threads, int cpus);

// Called first in main(): unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, and when spinning
// would steal, sets OMP_WAIT_POLICY=PASSIVE and re-executes the program (argv unchanged), since
// the OpenMP runtime has already read its environment by then. Returns when nothing needs doing
// or the exec failed.
void apply_default_wait_policy(char** argv);

}  // namespace snug::cli
