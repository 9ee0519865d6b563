// Issue 30's acceptance 4 on a training job (ZeRO stage 0): `mpirun -np 2 snug train
// --save-steps 3` with one rank made to fail mid-run, and what is left after.
//
//   kill_rank1     rank 1 gets SIGKILL mid-step, after checkpoints were written: the job ends
//                  non-zero and mpirun's message names rank 1; every checkpoint listed is whole
//                  (its files match trainer_state.json's sizes and checksums) and the output dir
//                  resumes on 1 rank.
//   stop_rank1     rank 1 gets SIGSTOP: rank 0 ends the job at its next collective after
//                  --ddp-timeout 5 s, naming rank 1; mpirun takes the stopped process down (no
//                  rank is left behind); the checkpoints are whole.
//   rank0_dies_in_save  rank 0, the writer, dies (SIGKILL) half-way through writing
//                  checkpoint-6 (SNUG_TEST_CRASH_DURING_SAVE, train/checkpoint.cpp): the job ends
//                  naming rank 0, checkpoint-6.tmp is never taken as a checkpoint, and
//                  checkpoint-3 resumes on 1 rank with batch 4 and on 2 ranks with batch 2 (the
//                  same global batch), their losses equal to 1e-5 relative, the 2-rank resume's
//                  bit-identical to an uninterrupted 2-rank run's; on 1 rank with batch 2 (a
//                  global batch of 2) it is accepted and the change said.
//
// Nothing is timed: the test waits for a checkpoint folder, for mpirun to end, and CTest's
// TIMEOUT bounds it all. Rank 1's process is found in /proc: a snug whose command line holds this
// case's output dir and whose environment has OMPI_COMM_WORLD_RANK=1.
//
// failure_check SNUG RUN_MPI_SH WORK_DIR CASE. Exit 77 (skipped) when run_mpi.sh finds no mpirun.
// Registered per case in tests/CMakeLists.txt (label mpi).
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
constexpr int kSkip = 77;

// The job's settings: a constant learning rate, so that a resume with another --max-steps steps
// as the run it continues would have.
const std::string kFlags =
    "--model llama-tiny --data dummy --seq-len 32 --learning-rate 1e-3 --seed 7 --threads 1 "
    "--lr-scheduler-type constant";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int exit_code(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int run(const std::string& cmd) {
  std::printf("$ %s\n", cmd.c_str());
  std::fflush(stdout);
  return exit_code(std::system(cmd.c_str()));
}

// `cmd` in the background through sh (which execs it), `env` ("VAR=value ", or "") its extra
// environment; its output to `log`.
pid_t start(const std::string& env, const std::string& cmd, const std::string& log) {
  std::printf("$ %s%s > %s 2>&1 &\n", env.c_str(), cmd.c_str(), log.c_str());
  std::fflush(stdout);
  const std::string line = env + "exec " + cmd + " > " + log + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The NUL-separated fields of /proc/PID/<what>.
std::vector<std::string> proc_fields(const std::string& pid, const char* what) {
  const std::string text = read_text("/proc/" + pid + "/" + what);
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\0', at);
    out.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return out;
}

// The snug processes of this case (their command line names `marker`, the output dir), with the
// rank each was given by mpirun (-1: none).
std::vector<std::pair<pid_t, int>> ranks_of(const std::string& marker) {
  std::vector<std::pair<pid_t, int>> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    const std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::vector<std::string> argv = proc_fields(pid, "cmdline");
    if (argv.empty() || fs::path(argv[0]).filename() != "snug") continue;
    bool ours = false;
    for (const std::string& a : argv) ours = ours || a.find(marker) != std::string::npos;
    if (!ours) continue;
    int rank = -1;
    for (const std::string& v : proc_fields(pid, "environ"))
      if (v.rfind("OMPI_COMM_WORLD_RANK=", 0) == 0) rank = std::atoi(v.c_str() + 21);
    out.emplace_back(static_cast<pid_t>(std::stoi(pid)), rank);
  }
  closedir(d);
  return out;
}

// Waits until the output dir lists checkpoint `step` (complete: renamed from its .tmp) while the
// job runs; false when the job ended first.
bool wait_for_checkpoint(pid_t job, const std::string& out, int64_t step) {
  for (;;) {
    for (const auto& [s, dir] : snug::list_checkpoints(out))
      if (s >= step) return true;
    int st = 0;
    if (waitpid(job, &st, WNOHANG) == job) {
      std::printf("the job ended (exit %d) before checkpoint-%lld was written\n", exit_code(st),
                  static_cast<long long>(step));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Every checkpoint the output dir lists is whole: its trainer_state.json parses (its checksum
// holds) and each file it records has the recorded size and checksum. Prints what is there.
bool checkpoints_whole(const std::string& out) {
  bool ok = true;
  for (const auto& e : fs::directory_iterator(out)) std::printf("  %s\n", e.path().c_str());
  const auto listed = snug::list_checkpoints(out);
  if (listed.empty()) {
    std::printf("no complete checkpoint is listed\n");
    return false;
  }
  for (const auto& [step, dir] : listed) {
    try {
      const snug::TrainerState st = snug::read_trainer_state(dir);
      for (const auto& [name, rec] : st.files.items())
        snug::verify_checkpoint_file(dir, name, st.files);
      std::printf("checkpoint-%lld: whole (%zu files verified)\n", static_cast<long long>(step),
                  st.files.size());
      if (fs::path(dir).extension() == ".tmp") {
        std::printf("%s: a temporary folder listed as a checkpoint\n", dir.c_str());
        ok = false;
      }
    } catch (const std::exception& e) {
      std::printf("checkpoint-%lld: %s\n", static_cast<long long>(step), e.what());
      ok = false;
    }
  }
  return ok;
}

// After the job: no process of it is left (mpirun waits for its ranks; a stopped one it must
// kill). Any left is continued and killed, so that the test never leaves one behind.
bool none_left(const std::string& marker) {
  const auto left = ranks_of(marker);
  for (const auto& [pid, rank] : left) {
    std::printf("left behind: pid %d (rank %d)\n", static_cast<int>(pid), rank);
    kill(pid, SIGCONT);
    kill(pid, SIGKILL);
  }
  return left.empty();
}

bool contains(const std::string& text, const std::string& what) {
  const bool found = text.find(what) != std::string::npos;
  std::printf("the job's output %s \"%s\"\n", found ? "says" : "does not say", what.c_str());
  return found;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Starts the 2-rank job (steps without end: it runs until a rank fails), waits for `checkpoint`,
// signals rank 1 with `sig` (0: none, the job fails by itself), and waits for the job's end.
// Returns mpirun's exit code, or -1 when something else went wrong (printed).
int fail_the_job(const std::string& snug, const std::string& run_mpi, const std::string& dir,
                 const std::string& env, const std::string& extra, int64_t checkpoint, int sig) {
  const std::string out = dir + "/out";
  const pid_t job = start(env,
                          run_mpi + " 2 " + snug + " train " + kFlags +
                              " --per-device-train-batch-size 2 --max-steps 1000000 "
                              "--save-steps 3 --save-total-limit 3 --output-dir " +
                              out + " " + extra,
                          dir + "/job.log");
  if (sig != 0) {
    if (!wait_for_checkpoint(job, out, checkpoint)) return -1;
    pid_t target = 0;
    for (const auto& [pid, rank] : ranks_of(out))
      if (rank == 1) target = pid;
    if (target == 0) {
      std::printf("rank 1's process was not found\n");
      kill(job, SIGTERM);
      waitpid(job, nullptr, 0);
      return -1;
    }
    std::printf("checkpoint-%lld is written; signal %d to rank 1 (pid %d)\n",
                static_cast<long long>(checkpoint), sig, static_cast<int>(target));
    std::fflush(stdout);
    kill(target, sig);
  }
  int st = 0;
  waitpid(job, &st, 0);
  std::printf("mpirun exited with %d\n", exit_code(st));
  return exit_code(st);
}

int kill_rank1(const std::string& snug, const std::string& run_mpi, const std::string& dir) {
  const int code = fail_the_job(snug, run_mpi, dir, "", "", 6, SIGKILL);
  if (code == kSkip) return kSkip;
  if (code <= 0) return 1;
  const std::string log = read_text(dir + "/job.log");
  bool ok = contains(log, "process rank 1 with PID");
  ok = contains(log, "exited on signal 9") && ok;
  ok = none_left(dir + "/out") && ok;
  ok = checkpoints_whole(dir + "/out") && ok;
  // The last complete checkpoint resumes on 1 rank (batch 4: the same global batch) and trains.
  const int64_t last = snug::list_checkpoints(dir + "/out").back().first;
  const int resumed =
      run(snug + " train " + kFlags + " --per-device-train-batch-size 4 --resume-from " + dir +
          "/out --max-steps " + std::to_string(last + 2) + " --report-json " + dir +
          "/one.json > " + dir + "/one.log 2>&1");
  ok = resumed == 0 && read_json(dir + "/one.json").at("loss").size() == 2 && ok;
  std::printf("resumed checkpoint-%lld on 1 rank: exit %d\n%s\n", static_cast<long long>(last),
              resumed, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int stop_rank1(const std::string& snug, const std::string& run_mpi, const std::string& dir) {
  const int code = fail_the_job(snug, run_mpi, dir, "", "--ddp-timeout 5", 6, SIGSTOP);
  if (code == kSkip) return kSkip;
  const bool left = !none_left(dir + "/out");  // before anything else: never leave it stopped
  if (code <= 0) return 1;
  const std::string log = read_text(dir + "/job.log");
  bool ok = contains(log, "snug: rank 0 of 2: ");
  ok = contains(log,
                "did not complete within --ddp-timeout 5 s: rank 1 did not arrive; "
                "ending the job") &&
       ok;
  // mpirun continues the stopped rank (SIGCONT) before it terminates it: the rank must not then
  // blame rank 0 for the time it spent stopped (dist/wait_deadline.h).
  if (log.find("rank 0 did not arrive") != std::string::npos) {
    std::printf("the continued rank 1 blames rank 0\n");
    ok = false;
  }
  ok = !left && checkpoints_whole(dir + "/out") && ok;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int rank0_dies_in_save(const std::string& snug, const std::string& run_mpi,
                       const std::string& dir) {
  const int code = fail_the_job(snug, run_mpi, dir, "SNUG_TEST_CRASH_DURING_SAVE=6 ", "", 0, 0);
  if (code == kSkip) return kSkip;
  if (code <= 0) return 1;
  const std::string out = dir + "/out";
  const std::string log = read_text(dir + "/job.log");
  bool ok = contains(log, "process rank 0 with PID");
  ok = none_left(out) && ok;
  const bool half = fs::exists(out + "/checkpoint-6.tmp");
  std::printf("checkpoint-6.tmp (the half-written one) %s\n", half ? "is there" : "is missing");
  ok = half && checkpoints_whole(out) && ok;
  std::string resolved;
  try {
    resolved = snug::resolve_checkpoint(out);
  } catch (const std::exception& e) {
    std::printf("%s\n", e.what());
  }
  std::printf("--resume-from %s takes %s\n", out.c_str(), resolved.c_str());
  ok = fs::path(resolved).filename() == "checkpoint-3" && ok;
  if (!ok) {
    std::printf("FAIL\n");
    return 1;
  }
  // From checkpoint-3 to step 8: 1 rank with batch 4 and 2 ranks with batch 2 (the same global
  // batch of 4 rows), and an uninterrupted 2-rank run for reference.
  const std::string common = kFlags + " --max-steps 8 --report-json ";
  const int one = run(snug + " train " + common + dir + "/one.json --per-device-train-batch-size " +
                      "4 --resume-from " + out + " > " + dir + "/one.log 2>&1");
  const int two = run(run_mpi + " 2 " + snug + " train " + common + dir +
                      "/two.json --per-device-train-batch-size 2 --resume-from " + out + " > " +
                      dir + "/two.log 2>&1");
  const int ref = run(run_mpi + " 2 " + snug + " train " + common + dir +
                      "/ref.json --per-device-train-batch-size 2 > " + dir + "/ref.log 2>&1");
  // Another global batch (1 rank of 2 rows): accepted and said; the data goes on at row 12.
  const int smaller = run(snug + " train " + common + dir + "/half.json --per-device-train-batch-" +
                          "size 2 --resume-from " + out + " > " + dir + "/half.log 2>&1");
  if (one != 0 || two != 0 || ref != 0 || smaller != 0) {
    std::printf("a run failed (exit %d, %d, %d, %d): see %s/*.log\nFAIL\n", one, two, ref, smaller,
                dir.c_str());
    return 1;
  }
  const std::string one_log = read_text(dir + "/one.log"), half_log = read_text(dir + "/half.log");
  ok = contains(one_log, "resume: world_size 2 -> 1 (changed since the checkpoint; accepted)");
  ok = !contains(one_log, "global batch") && ok;
  ok = contains(half_log, "resume: world_size 2 -> 1 (") && ok;
  ok = contains(half_log, "resume: global batch 4 -> 2 rows per step") && ok;
  const std::vector<double> a = read_json(dir + "/one.json").at("loss"),
                            b = read_json(dir + "/two.json").at("loss"),
                            r = read_json(dir + "/ref.json").at("loss");
  if (a.size() != 5 || b.size() != 5 || r.size() != 8) {
    std::printf("expected 5, 5 and 8 losses, got %zu, %zu and %zu\nFAIL\n", a.size(), b.size(),
                r.size());
    return 1;
  }
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / b[i]);
  const bool same = std::equal(b.begin(), b.end(), r.begin() + 3);
  std::printf(
      "steps 4-8 resumed on 1 rank (batch 4) against 2 ranks (batch 2): largest relative "
      "difference %.3g (limit 1e-5); 2 ranks resumed against uninterrupted: %s\n",
      worst, same ? "identical" : "different");
  ok = worst <= 1e-5 && same && read_json(dir + "/half.json").at("loss").size() == 5 && ok;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: failure_check SNUG RUN_MPI_SH WORK_DIR CASE\n");
    return 2;
  }
  const std::string snug = argv[1], run_mpi = argv[2], name = argv[4];
  const fs::path dir = fs::path(argv[3]) / ("failure_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  // run_mpi.sh exits 77 without mpirun.
  if (run(run_mpi + " 1 true > " + (dir / "probe.log").string() + " 2>&1") == kSkip) {
    std::printf("SNUG_MPI_SKIP: mpirun not found (install openmpi-bin: scripts/install-deps.sh)\n");
    return kSkip;
  }
  if (name == "kill_rank1") return kill_rank1(snug, run_mpi, dir.string());
  if (name == "stop_rank1") return stop_rank1(snug, run_mpi, dir.string());
  if (name == "rank0_dies_in_save") return rank0_dies_in_save(snug, run_mpi, dir.string());
  std::fprintf(stderr, "failure_check: no case %s\n", name.c_str());
  return 2;
}
