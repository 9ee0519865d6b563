// Issue 30's acceptance 1 for ZeRO stages 0-2: `mpirun -np 2 snug train` with per-rank batch B
// against one process with batch 2B, on the same data and seed. The losses of 10 steps agree to
// 1e-5 relative and the first step's gradients (SNUG_DUMP_FIRST_GRADIENTS, trainer_step.cpp:
// synchronised, before clipping; at stage 2 each rank's slice, in pieces) to 1e-6 relative (each
// tensor's ||a - b|| / ||a||). The sums differ only in float order: rank 0's rows and rank 1's are
// added as two partial sums. bf16 gradients: Case::bf16_gradients.
//
// CASE is [plan_|resume_|shards_][zero1_|zero2_|zero3_]NAME, NAME from the table below
// (shards_zeroK alone: the first), recut_2to1/1to2 (check_recut) or refuse_lomo. zeroK_ runs the
// two ranks with --zero-stage K (the one process runs plain). plan_: `snug plan --world-size 2
// [--zero-stage K]` of the case against rank 0's measured peak (check_plan); resume_: a 2-rank
// run's checkpoint resumed on 2 ranks (check_resume); shards_zeroK: acceptance 2, each rank's
// optimizer_state (stage 1) and gradients (stage 2) exactly 1/2 of one process's over the padded
// flat length (check_shards); refuse_lomo: LOMO over 2 ranks is refused with its reason
// (check_refusal).
//
// stage0_check SNUG RUN_MPI_SH SOURCE_DIR WORK_DIR CASE. Exit 77 (skipped) when run_mpi.sh finds
// no mpirun. Registered per case in tests/CMakeLists.txt (label mpi).
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace {

#define NO_DROPOUT \
  "--config-override hidden_dropout_prob=0 --config-override attention_probs_dropout_prob=0"

struct Case {
  const char* name;
  const char* flags;  // beside --max-steps 10 --seq-len/--max-length 32 and the batch
  // Given to the ranks (and the plan) only, with --zero-stage K: flags one process refuses.
  const char* ranks_only = "";
  // The one process runs its batch of 4 as 2 micro-batches of the ranks' 2 rows each. For 16-bit
  // compute: there splitting the batch at all moves the losses (a bf16 rounding that flips),
  // whether into micro-batches or ranks, so the ranks are held against the same split.
  bool one_process_accumulates = false;
  // bf16 gradients (--bf16-full, --precision-layout deepspeed): each rank rounds its own window's
  // gradient to bf16 before the fp32 sum (train/grad_sync.h), one process only its window's, so
  // 2 ranks at stage 0 agree with one process within bf16's rounding (kBf16Loss, kBf16Gradient),
  // and each ZeRO stage (zeroK_) is held to those 2 ranks at stage 0 bit for bit: the stages
  // change where the bytes live, not the arithmetic.
  bool bf16_gradients = false;
};

// bf16 gradients, 2 ranks against one process (see Case::bf16_gradients): rank 1's share rounded
// before the sum moves an element by up to 2^-9 of that share, and the sum's own rounding may then
// go the other way (2^-8 of it): a gradient within 2^-7 relative. Measured on a Zen 4 host: 2.8e-3
// and 3.2e-3 (bf16_full, deepspeed_layout); the losses of 10 steps 6.7e-5 and 1.9e-5.
constexpr double kBf16Loss = 2e-4, kBf16Gradient = 0x1p-7;

// The fixtures: a Llama and a GPT-2 on --data dummy; jsonl prompt-completion records with
// completion-only loss (completions of 1 to 3 tokens: the ranks' counts of valid targets differ);
// LoRA and QLoRA on the Llama; BERT's masked LM and sequence classification.
const Case kCases[] = {
    {"llama", "--model llama-tiny --data dummy --seq-len 32"},
    {"gpt2", "--model gpt2-tiny --data dummy --seq-len 32"},
    // Buckets of 0.05 MiB: many all-reduces started during backward, two in flight, gradients
    // cut across buckets (the default cap holds these models' gradients in one).
    {"llama_small_buckets",
     "--model llama-tiny --data dummy --seq-len 32 --ddp-bucket-cap-mb 0.05 "
     "--gradient-accumulation-steps 2"},
    // Gradient checkpointing in segments of 2 layers: ZeRO stage 3 gathers each layer again for
    // the recomputed forward inside its segment's backward.
    {"llama_checkpointing",
     "--model llama-tiny --data dummy --seq-len 32 --gradient-checkpointing --checkpoint-policy "
     "every-k:2"},
    {"jsonl_completion_only",
     "--model llama-tiny --vocab-size 4096 --tokenizer "
     "SRC/tests/fixtures/tokenizers/gpt2_style.json --data "
     "SRC/examples/arithmetic-instructions.jsonl --max-length 32"},
    // Distributed evaluation (train/evaluate.h): the evaluation's 16 rows in batches of 7 dealt
    // to the ranks (rank 0: 7 + 2 rows, rank 1: 7; unequal valid targets); eval_loss as one
    // process's. LoRA: small gradients, so that the evaluation makes the peak, and rank 1's
    // batch is wider than rank 0's: its plan (9,026,832 bytes for one process's evaluation,
    // 8,904,920 for rank 0's share) tells the two apart.
    {"jsonl_eval",
     "--model llama-tiny --vocab-size 4096 --tokenizer "
     "SRC/tests/fixtures/tokenizers/gpt2_style.json --data "
     "SRC/examples/arithmetic-instructions.jsonl --max-length 32 --lora-r 8 --eval-split 0.1 "
     "--eval-steps 5 --per-device-eval-batch-size 7"},
    {"lora", "--model llama-tiny --data dummy --seq-len 32 --lora-r 8 --target-modules all-linear"},
    // QLoRA's bf16 compute dtype: on the bf16 GEMM path (auto's choice on AMX and AVX512-BF16
    // CPUs) oneDNN's bf16 matmul sums in an order that follows the rows it is given, so B rows
    // on each of 2 ranks and 2B in one process part by 1.2e-5 after 10 steps; widen keeps the
    // comparison about the ranks (the bf16 path's own checks: GemmPathNnLinear.*).
    {"qlora", "--model llama-tiny --data dummy --seq-len 32 --qlora --gemm-path widen"},
    // LoRA over a bf16 base (--bf16-full): the adapters train in fp32, as PEFT's, so their
    // gradients go through the buckets as any fp32 run's (only bf16 gradients are refused, not
    // built yet). widen, as qlora's, keeps the comparison about the ranks. One process with
    // batch 4 and with 2 micro-batches of 2 differ by 4.1e-5 after 10 steps; 2 ranks equal the
    // latter bit for bit (stage 0).
    {"lora_bf16_full",
     "--model llama-tiny --data dummy --seq-len 32 --lora-r 8 --target-modules all-linear "
     "--bf16-full --gemm-path widen",
     "", true},
    // 239590 trainable elements, not a multiple of 2N = 4: ZeRO's flat layout pads 2 elements
    // onto rank 1's slice.
    // bf16 weights and gradients over the ranks: --bf16-full (bf16 AdamW state, stochastic
    // rounding drawn per element of the whole tensor, so a rank's piece draws what one process
    // does) and DeepSpeed's layout (bf16 weights and gradients, fp32 master and moments).
    {"bf16_full", "--model llama-tiny --data dummy --seq-len 32 --bf16-full --gemm-path widen", "",
     true, true},
    {"deepspeed_layout",
     "--model gpt2-tiny --data dummy --seq-len 32 --precision-layout deepspeed --gemm-path widen",
     "", true, true},
    {"gpt2_odd", "--model gpt2-tiny --n-embd 65 --n-head 1 --data dummy --seq-len 32"},
    // --offload-optimizer cpu (train/offload.h): each rank's pieces' state in its host pool.
    {"gpt2_offload", "--model gpt2-tiny --data dummy --seq-len 32 --offload-optimizer cpu"},
    // --offload-param cpu (stage 3 only): each rank's shards in its host pool, the one process
    // without them (it runs plain).
    {"gpt2_offload_param", "--model gpt2-tiny --data dummy --seq-len 32", "--offload-param cpu"},
    {"gpt2_offload_both", "--model gpt2-tiny --data dummy --seq-len 32 --offload-optimizer cpu",
     "--offload-param cpu"},
    // The masked-LM collator's masks and the dummy labels are drawn at each rank's rows of the
    // global batch: the same as one process's. Dropout off here (the collator alone); on below.
    {"masked_lm", "--model bert-tiny --data dummy --seq-len 32 " NO_DROPOUT},
    // Dropout: each rank draws the masks one process draws for its rows of the global batch
    // (nn/run_context.h, first_row): BERT's hidden and attention dropout at 0.1; LoRA dropout
    // at 0.05 and NEFTune's noise on GPT-2 (whose blocks have no dropout).
    {"masked_lm_dropout",
     "--model bert-tiny --data dummy --seq-len 32 --config-override hidden_dropout_prob=0.1 "
     "--config-override attention_probs_dropout_prob=0.1"},
    {"gpt2_lora_dropout",
     "--model gpt2-tiny --data dummy --seq-len 32 --lora-r 8 --lora-dropout 0.05 "
     "--target-modules all-linear --neftune-noise-alpha 5"},
    {"sequence_classification",
     "--model bert-tiny --task sequence-classification --num-labels 3 --data dummy --seq-len "
     "32 " NO_DROPOUT},
    // The pooler's dropout too (classifier_dropout falls back to hidden_dropout_prob).
    {"sequence_classification_dropout",
     "--model bert-tiny --task sequence-classification --num-labels 3 --data dummy --seq-len 32 "
     "--config-override hidden_dropout_prob=0.1 --config-override "
     "attention_probs_dropout_prob=0.1"},
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

int run(const std::string& cmd) {
  std::printf("$ %s\n", cmd.c_str());
  std::fflush(stdout);
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// run_mpi.sh exits 77 when it finds no mpirun: the check is then skipped, with the reason.
constexpr int kSkip = 77;
bool skipped(int st) {
  if (st != kSkip) return false;
  std::printf("SNUG_MPI_SKIP: mpirun not found (install openmpi-bin: scripts/install-deps.sh)\n");
  return true;
}

// An `mpirun -np 2` run whose output went to `log`: 0 when it ran, kSkip without mpirun, 1 (with
// the log named) when it failed.
int two_ranks_outcome(int st, const std::string& log) {
  if (skipped(st)) return kSkip;
  if (st == 0) return 0;
  std::printf("mpirun -np 2 failed (exit %d): see %s\n", st, log.c_str());
  return 1;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// `snug plan --world-size 2` (flags may hold --zero-stage K) against rank 0 of a real `mpirun -np
// 2` run: the plan's peak equals rank 0's tracked peak to the byte (the report's "ranks").
int check_plan(const std::string& snug, const std::string& run_mpi, const std::string& flags,
               const std::string& plan, const std::string& two) {
  if (run(snug + " plan " + flags + " --per-device-train-batch-size 2 --world-size 2 --json " +
          plan + ".json > " + plan + ".log 2>&1") != 0) {
    std::printf("snug plan failed: see %s.log\n", plan.c_str());
    return 1;
  }
  if (const int st = two_ranks_outcome(run(run_mpi + " 2 " + snug + " train " + flags +
                                           " --per-device-train-batch-size 2 --report-json " + two +
                                           ".json > " + two + ".log 2>&1"),
                                       two + ".log"))
    return st;
  const int64_t planned = read_json(plan + ".json").at("memory").at("peak_bytes");
  const int64_t measured = read_json(two + ".json").at("ranks").at(0).at("peak_total");
  std::printf("plan --world-size 2: peak %lld bytes; rank 0 of mpirun -np 2: %lld bytes\n",
              static_cast<long long>(planned), static_cast<long long>(measured));
  bool ok = planned == measured;
  // --offload-optimizer cpu: rank 0's host pool (the report's memory.host) as planned.
  const nlohmann::json pm = read_json(plan + ".json").at("memory");
  if (pm.contains("host")) {
    const nlohmann::json mh = read_json(two + ".json").at("memory").value("host", nlohmann::json());
    const bool same = !mh.is_null() && pm["host"]["peak_bytes"] == mh["peak_bytes"] &&
                      pm["host"]["max_by_category"] == mh["max_by_category"];
    std::printf("host pool: planned peak %s, rank 0's %s\n",
                pm["host"]["peak_bytes"].dump().c_str(),
                mh.is_null() ? "missing" : mh["peak_bytes"].dump().c_str());
    ok = ok && same;
  }
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

// Checkpoints of a 2-rank run (rank 0 writes, the other waits at the barrier) resume on 2 ranks
// to the same losses, bit for bit: the data position counts both ranks' rows.
int check_resume(const std::string& snug, const std::string& run_mpi, const std::string& flags,
                 const std::string& dir) {
  const std::string common =
      flags + " --per-device-train-batch-size 2 --save-steps 5 --output-dir " + dir + "/out";
  const int full = run(run_mpi + " 2 " + snug + " train " + common + " --report-json " + dir +
                       "/full.json > " + dir + "/full.log 2>&1");
  if (skipped(full)) return kSkip;
  if (full != 0 || run(run_mpi + " 2 " + snug + " train " + common + " --resume-from " + dir +
                       "/out/checkpoint-5 --report-json " + dir + "/resumed.json > " + dir +
                       "/resumed.log 2>&1") != 0) {
    std::printf("a run failed: see %s/*.log\n", dir.c_str());
    return 1;
  }
  const std::vector<double> a = read_json(dir + "/full.json").at("loss"),
                            b = read_json(dir + "/resumed.json").at("loss");
  const bool ok = a.size() == 10 && b.size() == 5 && std::equal(b.begin(), b.end(), a.begin() + 5);
  std::printf("steps 6-10 of the run: %zu losses, resumed from checkpoint-5: %zu, %s\n", a.size(),
              b.size(), ok ? "identical" : "different");
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

// Acceptance 2: with AdamW (8 bytes of fp32 state per element, 4 of gradient), one process holds
// 8P of optimizer_state and 4P of gradients for P trainable elements; each of N ranks holds, at
// stage 1, optimizer_state 8 * padded(P, N) / N and, at stage 2, also gradients
// 4 * padded(P, N) / N, where padded(P, N) = ceil(P / 2N) * 2N (DeepSpeed's flat layout,
// train/zero_layout.h). Byte counts are the reports' max_by_category.
int check_shards(const std::string& snug, const std::string& run_mpi, const std::string& flags,
                 int stage, const std::string& one, const std::string& two) {
  if (run(snug + " train " + flags + " --per-device-train-batch-size 4 --report-json " + one +
          ".json > " + one + ".log 2>&1") != 0) {
    std::printf("one process failed: see %s.log\n", one.c_str());
    return 1;
  }
  if (const int st = two_ranks_outcome(
          run(run_mpi + " 2 " + snug + " train " + flags + " --zero-stage " +
              std::to_string(stage) + " --per-device-train-batch-size 2 --report-json " + two +
              ".json > " + two + ".log 2>&1"),
          two + ".log"))
    return st;
  const nlohmann::json a = read_json(one + ".json"), b = read_json(two + ".json");
  const int64_t state = a.at("memory").at("max_by_category").at("optimizer_state");
  const int64_t grads = a.at("memory").at("max_by_category").at("gradients");
  const int64_t P = state / 8, N = 2, padded = (P + 2 * N - 1) / (2 * N) * (2 * N);
  bool ok = state == 8 * P && grads == 4 * P;
  std::printf(
      "one process: %lld trainable elements, optimizer_state %lld, gradients %lld; padded "
      "to %lld\n",
      static_cast<long long>(P), static_cast<long long>(state), static_cast<long long>(grads),
      static_cast<long long>(padded));
  for (const nlohmann::json& r : b.at("ranks")) {
    const int64_t rs = r.at("max_by_category").at("optimizer_state");
    const int64_t rg = r.at("max_by_category").at("gradients");
    std::printf("rank %d: optimizer_state %lld (expected %lld), gradients %lld%s\n",
                r.at("rank").get<int>(), static_cast<long long>(rs),
                static_cast<long long>(8 * padded / N), static_cast<long long>(rg),
                stage == 2 ? (" (expected " + std::to_string(4 * padded / N) + ")").c_str() : "");
    ok = ok && rs == 8 * padded / N && (stage < 2 || rg == 4 * padded / N);
  }
  ok = ok && b.at("ranks").size() == 2;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

// Acceptance 2 at stage 3 (train/zero3_params.h): each trainable parameter of n_i elements is
// padded on its own to ceil(n_i / N) * N, so with padded = the sum of those, each of N ranks
// holds, outside a gathered block (its final_by_category: nothing is gathered after the run),
// weights 4 * padded / N, and at most gradients 4 * padded / N and optimizer_state (AdamW)
// 8 * padded / N. The n_i come from one process's first gradients (SNUG_DUMP_FIRST_GRADIENTS).
int check_shards3(const std::string& snug, const std::string& run_mpi, const std::string& flags,
                  const std::string& one, const std::string& two) {
  if (run("SNUG_DUMP_FIRST_GRADIENTS=" + one + ".safetensors " + snug + " train " + flags +
          " --per-device-train-batch-size 4 --report-json " + one + ".json > " + one +
          ".log 2>&1") != 0) {
    std::printf("one process failed: see %s.log\n", one.c_str());
    return 1;
  }
  if (const int st =
          two_ranks_outcome(run(run_mpi + " 2 " + snug + " train " + flags +
                                " --zero-stage 3 --per-device-train-batch-size 2 --report-json " +
                                two + ".json > " + two + ".log 2>&1"),
                            two + ".log"))
    return st;
  constexpr int64_t N = 2;
  int64_t P = 0, padded = 0;
  const snug::SafetensorsFile g(one + ".safetensors");
  for (const std::string& t : g.names()) {
    const auto n = static_cast<int64_t>(g.read_f32(t).size());
    P += n;
    padded += (n + N - 1) / N * N;
  }
  const nlohmann::json a = read_json(one + ".json"), b = read_json(two + ".json");
  const int64_t weights = a.at("memory").at("final_by_category").at("weights");
  bool ok = weights == 4 * P;
  std::printf(
      "one process: %zu trainable tensors, %lld elements (weights %lld); padded per "
      "parameter to %lld\n",
      g.names().size(), static_cast<long long>(P), static_cast<long long>(weights),
      static_cast<long long>(padded));
  for (const nlohmann::json& r : b.at("ranks")) {
    const int64_t rw = r.at("final_by_category").at("weights");
    const int64_t rs = r.at("max_by_category").at("optimizer_state");
    const int64_t rg = r.at("max_by_category").at("gradients");
    std::printf(
        "rank %d: weights outside a block %lld (expected %lld), optimizer_state %lld (expected "
        "%lld), gradients %lld (expected %lld); weights at the peak %lld\n",
        r.at("rank").get<int>(), static_cast<long long>(rw), static_cast<long long>(4 * padded / N),
        static_cast<long long>(rs), static_cast<long long>(8 * padded / N),
        static_cast<long long>(rg), static_cast<long long>(4 * padded / N),
        static_cast<long long>(r.at("peak_by_category").at("weights").get<int64_t>()));
    ok = ok && rw == 4 * padded / N && rs == 8 * padded / N && rg == 4 * padded / N;
  }
  ok = ok && b.at("ranks").size() == 2;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

// A checkpoint re-cut to another number of ranks (train/zero_checkpoint.h): a run on `from_np`
// ranks (1: plain `snug train`, batch 4; 2: mpirun, batch 2 each, with `from_zero`) saves at step
// 5; a run on `to_np` ranks resumes it with `to_zero`. Its losses of steps 6-10 match the saving
// run's to 1e-5 relative (the ranks add in another order, so not bit for bit).
int check_recut(const std::string& snug, const std::string& run_mpi, const std::string& flags,
                const std::string& dir, int from_np, const std::string& from_zero, int to_np,
                const std::string& to_zero) {
  const auto launch = [&](int np, const std::string& zero, const std::string& extra,
                          const std::string& log) {
    const std::string batch =
        np == 1 ? " --per-device-train-batch-size 4" : " --per-device-train-batch-size 2";
    return run((np == 1 ? snug : run_mpi + " 2 " + snug) + " train " + flags + zero + batch +
               " --save-steps 5 " + extra + " > " + dir + "/" + log + ".log 2>&1");
  };
  const int full =
      launch(from_np, from_zero, "--output-dir " + dir + "/out --report-json " + dir + "/full.json",
             "full");
  if (skipped(full)) return kSkip;
  if (full != 0 || launch(to_np, to_zero,
                          "--output-dir " + dir + "/out2 --resume-from " + dir +
                              "/out/checkpoint-5 --report-json " + dir + "/resumed.json",
                          "resumed") != 0) {
    std::printf("a run failed: see %s/*.log\n", dir.c_str());
    return 1;
  }
  const std::vector<double> a = read_json(dir + "/full.json").at("loss"),
                            b = read_json(dir + "/resumed.json").at("loss");
  if (a.size() != 10 || b.size() != 5) {
    std::printf("expected 10 and 5 losses, got %zu and %zu\n", a.size(), b.size());
    return 1;
  }
  double worst = 0;
  for (size_t i = 0; i < b.size(); ++i)
    worst = std::max(worst, std::abs(a[i + 5] - b[i]) / std::abs(a[i + 5]));
  std::printf(
      "%d rank(s)%s -> %d rank(s)%s: steps 6-10 largest relative difference %.3g (limit "
      "1e-5)\n",
      from_np, from_zero.c_str(), to_np, to_zero.c_str(), worst);
  std::printf("%s\n", worst <= 1e-5 ? "PASS" : "FAIL");
  return worst <= 1e-5 ? 0 : 1;
}

// What stage 0 refuses over 2 ranks ends the job with the reason, on every rank.
int check_refusal(const std::string& snug, const std::string& run_mpi, const std::string& flags,
                  const std::string& dir, const std::string& extra, const std::string& expected) {
  const std::string log = dir + "/refused.log";
  const int st = run(run_mpi + " 2 " + snug + " train " + flags +
                     " --per-device-train-batch-size 2 " + extra + " > " + log + " 2>&1");
  if (skipped(st)) return kSkip;
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool ok = st != 0 && text.find(expected) != std::string::npos;
  std::printf("%s: exit %d, %s\n%s\n", extra.c_str(), st,
              text.find(expected) != std::string::npos ? "the reason given" : "no reason",
              ok ? "PASS" : "FAIL");
  if (!ok) std::printf("%s\n", text.c_str());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: stage0_check SNUG RUN_MPI_SH SOURCE_DIR WORK_DIR CASE\n");
    return 2;
  }
  const std::string snug = argv[1], run_mpi = argv[2], src = argv[3], work = argv[4],
                    name = argv[5];
  // [plan_|resume_][zero1_|zero2_]NAME, shards_zeroK, refuse_lomo.
  std::string rest = name;
  const auto strip = [&rest](const std::string& prefix) {
    if (rest.rfind(prefix, 0) != 0) return false;
    rest = rest.substr(prefix.size());
    return true;
  };
  const bool plan = strip("plan_"), resume = strip("resume_"), shards = strip("shards_");
  int stage = 0;
  if (strip("zero1_") || rest == "zero1") stage = 1;
  if (strip("zero2_") || rest == "zero2") stage = 2;
  if (strip("zero3_") || rest == "zero3") stage = 3;
  // shards_zeroK[_NAME]: the first case unless named.
  const Case* c = nullptr;
  for (const Case& k : kCases)
    if (rest == k.name) c = &k;
  const bool recut = strip("recut_");
  if (name == "refuse_lomo" || recut || (shards && c == nullptr)) c = &kCases[0];
  if (c == nullptr) {
    std::fprintf(stderr, "stage0_check: no case %s\n", name.c_str());
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(work) / ("stage0_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string flags = replace_all(c->flags, "SRC", src) +
                            " --max-steps 10 --learning-rate 1e-3 --seed 7 --threads 1";
  const std::string one = (dir / "one").string(), two = (dir / "two").string();
  if (shards && stage == 3) return check_shards3(snug, run_mpi, flags, one, two);
  if (shards) return check_shards(snug, run_mpi, flags, stage, one, two);
  const std::string zero =
      (stage > 0 ? " --zero-stage " + std::to_string(stage) : "") + " " + c->ranks_only;
  if (plan) return check_plan(snug, run_mpi, flags + zero, one, two);
  if (resume) return check_resume(snug, run_mpi, flags + zero, dir.string());
  // recut_2to1: ZeRO-2 on 2 ranks resumed by one process; recut_1to2: one process resumed by
  // ZeRO-1 on 2 ranks; recut_zero3_2to1: ZeRO-3 on 2 ranks resumed by one process (the
  // per-parameter index re-cut to whole tensors).
  if (recut && rest == "2to1")
    return check_recut(snug, run_mpi, flags, dir.string(), 2, " --zero-stage 2", 1, "");
  if (recut && rest == "zero3_2to1")
    return check_recut(snug, run_mpi, flags, dir.string(), 2, " --zero-stage 3", 1, "");
  if (recut && rest == "1to2")
    return check_recut(snug, run_mpi, flags, dir.string(), 1, "", 2, " --zero-stage 1");
  if (name == "refuse_lomo")
    return check_refusal(snug, run_mpi, flags, dir.string(), "--optim lomo",
                         "--optim lomo over 2 ranks: its update runs inside backward");
  const std::string one_batch =
      c->one_process_accumulates
          ? " --per-device-train-batch-size 2 --gradient-accumulation-steps 2"
          : " --per-device-train-batch-size 4";
  // bf16 gradients at a ZeRO stage: the reference is 2 ranks at stage 0, bit for bit.
  const bool against_stage0 = c->bf16_gradients && stage > 0;
  const double loss_limit = against_stage0 ? 0.0 : c->bf16_gradients ? kBf16Loss : 1e-5;
  const double grad_limit = against_stage0 ? 0.0 : c->bf16_gradients ? kBf16Gradient : 1e-6;
  const std::string dump_one = "SNUG_DUMP_FIRST_GRADIENTS=" + one + ".safetensors ";
  const std::string to_one = " --report-json " + one + ".json > " + one + ".log 2>&1";
  if (against_stage0) {
    if (const int st = two_ranks_outcome(run(dump_one + run_mpi + " 2 " + snug + " train " + flags +
                                             " --per-device-train-batch-size 2" + to_one),
                                         one + ".log"))
      return st;
  } else if (run(dump_one + snug + " train " + flags + one_batch + to_one) != 0) {
    std::printf("one process failed: see %s.log\n", one.c_str());
    return 1;
  }
  if (const int st = two_ranks_outcome(
          run("SNUG_DUMP_FIRST_GRADIENTS=" + two + ".safetensors " + run_mpi + " 2 " + snug +
              " train " + flags + zero + " --per-device-train-batch-size 2 --report-json " + two +
              ".json > " + two + ".log 2>&1"),
          two + ".log"))
    return st;
  bool ok = true;
  const nlohmann::json a = read_json(one + ".json"), b = read_json(two + ".json");
  const std::vector<double> la = a.at("loss"), lb = b.at("loss");
  if (la.size() != 10 || lb.size() != 10) {
    std::printf("expected 10 losses, got %zu and %zu\n", la.size(), lb.size());
    return 1;
  }
  double worst_loss = 0;
  for (size_t i = 0; i < la.size(); ++i)
    worst_loss = std::max(worst_loss, std::abs(la[i] - lb[i]) / std::abs(la[i]));
  std::printf("%s: losses %.6f .. %.6f against %s, largest relative difference %.3g (limit %g)\n",
              name.c_str(), la.front(), la.back(),
              against_stage0 ? "2 ranks at stage 0" : "one process", worst_loss, loss_limit);
  ok = ok && worst_loss <= loss_limit;
  // Evaluations: eval_loss to 1e-6 relative (and eval_accuracy, where there is one, equal).
  if (a.contains("eval_history") || b.contains("eval_history")) {
    const nlohmann::json ea = a.value("eval_history", nlohmann::json::array()),
                         eb = b.value("eval_history", nlohmann::json::array());
    double worst_eval = ea.size() == eb.size() && !ea.empty() ? 0.0 : 1.0;
    for (size_t i = 0; i < std::min(ea.size(), eb.size()); ++i) {
      const double x = ea[i].at("eval_loss"), y = eb[i].at("eval_loss");
      worst_eval = std::max(worst_eval, std::abs(x - y) / std::abs(x));
      ok = ok && ea[i].at("eval_samples") == eb[i].at("eval_samples") &&
           ea[i].value("eval_accuracy", -1.0) == eb[i].value("eval_accuracy", -1.0);
    }
    std::printf(
        "%s: %zu and %zu evaluations, eval_loss %.6f, largest relative difference %.3g "
        "(limit 1e-6)\n",
        name.c_str(), ea.size(), eb.size(),
        ea.empty() ? 0.0 : ea.back().at("eval_loss").get<double>(), worst_eval);
    ok = ok && worst_eval <= 1e-6;
  }
  if (!b.contains("ranks") || b["ranks"].size() != 2) {
    std::printf("the 2-rank report has no \"ranks\" of 2\n");
    ok = false;
  }
  // One process's gradients against the two ranks': whole tensors, or at stage 2 the pieces of
  // both ranks' slices ("<name>@<first element>"), each added to its tensor's sums.
  const snug::SafetensorsFile ga(one + ".safetensors");
  std::map<std::string, std::pair<double, double>> sums;  // name -> (||a-b||^2, ||a||^2)
  std::map<std::string, int64_t> covered;
  std::vector<std::string> files = {two + ".safetensors"};
  if (stage >= 2) files.push_back(two + ".safetensors.rank-1");
  for (const std::string& f : files) {
    const snug::SafetensorsFile gb(f);
    for (const std::string& piece : gb.names()) {
      const size_t at = piece.rfind('@');
      const std::string t = stage >= 2 ? piece.substr(0, at) : piece;
      const size_t first = stage >= 2 ? std::stoull(piece.substr(at + 1)) : 0;
      const std::vector<float> x = ga.read_f32(t), y = gb.read_f32(piece);
      auto& [diff, norm] = sums[t];
      for (size_t i = 0; i < y.size(); ++i) {
        const double d = static_cast<double>(x[first + i]) - y[i];
        diff += d * d;
        norm += static_cast<double>(x[first + i]) * x[first + i];
      }
      covered[t] += static_cast<int64_t>(y.size());
    }
  }
  for (const std::string& t : ga.names())
    if (covered[t] != static_cast<int64_t>(ga.read_f32(t).size())) {
      std::printf("gradient %s: the two ranks' files cover %lld of its %zu elements\n", t.c_str(),
                  static_cast<long long>(covered[t]), ga.read_f32(t).size());
      return 1;
    }
  double worst_grad = 0;
  std::string worst_name;
  for (const auto& [t, dn] : sums) {
    const double rel = dn.second > 0 ? std::sqrt(dn.first / dn.second) : std::sqrt(dn.first);
    if (rel >= worst_grad) {
      worst_grad = rel;
      worst_name = t;
    }
  }
  std::printf("%s: %zu gradients, largest relative difference %.3g (%s; limit %g)\n", name.c_str(),
              ga.names().size(), worst_grad, worst_name.c_str(), grad_limit);
  ok = ok && worst_grad <= grad_limit;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
