// OpenMP's wait policy for the snug executable (omp_wait_policy.h says why and when).
//
// libgomp reads OMP_WAIT_POLICY once, in its own constructor, before main() runs; a
// .preinit_array entry runs earlier still but before libc has its environment (a variable set
// there is lost when libc initializes), and oneDNN's libgomp rules out a second, static runtime.
// So main() sets the variable and runs the program again with it: one exec, about 5 ms, and
// only on a machine that is busy when snug starts.
#include "cli/omp_wait_policy.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <string>

namespace snug::cli {

namespace {

// /proc/stat's procs_running: the tasks runnable at this instant, this process included; -1
// when it cannot be read.
int procs_running() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "procs_running") {
      int n = -1;
      in >> n;
      return n;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

// The threads OpenMP will start with: OMP_NUM_THREADS's first value, else every usable CPU.
int planned_threads(int cpus) {
  if (const char* v = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(v);
    if (n > 0) return n;
  }
  return cpus;
}

}  // namespace

int other_runnable_tasks() {
  // The median of 9 samples 1 ms apart: a steadily busy process is in every sample, a daemon's
  // blip in few.
  std::array<int, 9> s{};
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = procs_running();
    if (s[i] < 1) return -1;
    if (i + 1 < s.size()) usleep(1000);
  }
  std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
  return s[s.size() / 2] - 1;
}

bool spinning_would_steal(int other_runnable, int threads, int cpus) {
  return other_runnable >= 0 && other_runnable + threads > cpus;
}

void apply_default_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  const int cpus = usable_cpus();
  if (!spinning_would_steal(other_runnable_tasks(), planned_threads(cpus), cpus)) return;
  if (setenv("OMP_WAIT_POLICY", kBusyOmpWaitPolicy, 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed (no /proc): run on under the runtime's default, and say so
  // in the report by leaving the variable unset.
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace snug::cli
