#include "generate/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "core/error.h"
#include "core/random.h"
#include "generate/logits_process.h"
#include "nn/kv_cache.h"

namespace snug {

namespace {

// Row b of (B,V) logits, downloaded to the host (never called on meta, which has no values).
std::vector<float> row_of(const Tensor& logits, int64_t b, int64_t V) {
  std::vector<float> row(static_cast<size_t>(V));
  logits.device().download(row.data(), logits.data<float>() + b * V, V);
  return row;
}

bool is_eos(const GenerationConfig& cfg, int32_t t) {
  return std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), t) !=
         cfg.eos_token_ids.end();
}

// Whether a chosen token ends its sequence.
using EosTest = std::function<bool(int32_t)>;

// Uniform in [0, 1) from (seed, draw): counter-based, the same on every platform.
double uniform(uint64_t seed, uint64_t draw) {
  const uint64_t x = splitmix64_mix(seed ^ splitmix64_mix(draw + 0x9e3779b97f4a7c15ull));
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

// The pad token a finished sequence gets while the others go on (transformers' pad_token_id,
// else its eos; token 0 when there is neither: nothing can finish then).
int32_t pad_of(const GenerationConfig& cfg) {
  if (cfg.pad_token_id >= 0) return cfg.pad_token_id;
  return cfg.eos_token_ids.empty() ? 0 : cfg.eos_token_ids[0];
}

std::vector<int32_t> flatten(const std::vector<std::vector<int32_t>>& rows, int64_t copies) {
  std::vector<int32_t> out;
  for (const std::vector<int32_t>& r : rows)
    for (int64_t k = 0; k < copies; ++k) out.insert(out.end(), r.begin(), r.end());
  return out;
}

// Greedy or sampling over B rows, as transformers' _sample: every row picks its token, a row
// that has finished gets the pad token instead, and the loop ends when every row has finished or
// after max_new_tokens.
BatchGenerationResult greedy_or_sample(Model& model,
                                       const std::vector<std::vector<int32_t>>& prompts,
                                       const GenerationConfig& cfg, const EosTest& eos,
                                       const std::function<void(int64_t, int32_t)>& on_token) {
  const auto B = static_cast<int64_t>(prompts.size());
  const auto P = static_cast<int64_t>(prompts[0].size());
  nn::KVCache cache(model.device(), model.kv_cache_shape(), B, P + cfg.max_new_tokens);
  BatchGenerationResult res;
  res.kv_cache_bytes = cache.bytes();
  res.sequences.resize(static_cast<size_t>(B));
  std::vector<std::vector<int32_t>> seq = prompts;
  const std::vector<int32_t> first = flatten(prompts, 1);
  Tensor logits = model.forward_cached(first.data(), B, P, cache);  // (B,V)
  const int64_t V = logits.dim(1);
  ++res.forwards;
  const int32_t pad = pad_of(cfg);
  std::vector<char> running(static_cast<size_t>(B), 1);
  std::vector<int32_t> next(static_cast<size_t>(B));
  for (int64_t step = 0;; ++step) {
    for (int64_t b = 0; b < B; ++b) {
      if (!running[b]) {
        next[b] = pad;
        seq[b].push_back(pad);
        continue;
      }
      int32_t tok = 0;  // meta has no values: token 0, and no host work (plans probe big batches)
      if (!logits.is_meta()) {
        std::vector<float> s = row_of(logits, b, V);
        apply_repetition_penalty(s, seq[b], cfg.repetition_penalty);
        if (cfg.do_sample) {
          apply_temperature(s, cfg.temperature);
          apply_top_k(s, cfg.top_k);
          apply_top_p(s, cfg.top_p);
          tok = sample_from(s, uniform(cfg.seed, static_cast<uint64_t>(step * B + b)));
        } else {
          tok = argmax(s);
        }
      }
      next[b] = tok;
      seq[b].push_back(tok);
      GeneratedSequence& out = res.sequences[b];
      out.tokens.push_back(tok);
      if (on_token) on_token(b, tok);
      if (eos(tok)) {
        out.stopped_at_eos = true;
        running[b] = 0;
      }
    }
    logits.reset();
    const bool any = std::any_of(running.begin(), running.end(), [](char r) { return r; });
    if (!any || step + 1 == cfg.max_new_tokens) break;
    logits = model.forward_cached(next.data(), B, 1, cache);
    ++res.forwards;
  }
  return res;
}

// Indices of the k largest values, largest first (ties: lower index first).
std::vector<int64_t> top_indices(const std::vector<float>& v, int64_t k) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int64_t a, int64_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

// One prompt's state in transformers' beam search (GenerationMixin._beam_search): K running
// beams and K finished slots with their scores.
struct Beams {
  std::vector<std::vector<int32_t>> running, finished;
  std::vector<float> run_scores, fin_scores;
  std::vector<char> fin_done;
  bool unsatisfied = true;  // the early-stop heuristic: running beams may still win
};

constexpr float kNeg = -1.0e9f;

// One step of prompt `beams` from its K rows of (rows, V) logits starting at `row0`: keep
// max(2, 1 + #eos) x K candidates, continue the best K that did not stop (from[k]: the row
// each continues, relative to row0), and let the top K candidates that did stop compete for the
// K finished slots with their length-penalized scores. Sets *all_hit false when some candidate
// did not stop.
void beam_step(Beams& st, const Tensor& logits, int64_t row0, int64_t V, int64_t cur, int64_t P,
               int64_t max_len, const GenerationConfig& cfg, const EosTest& eos, int32_t* from,
               bool* all_hit) {
  const int64_t K = cfg.num_beams;
  const int64_t n_eos = static_cast<int64_t>(cfg.eos_token_ids.size());
  const int64_t keep = std::max<int64_t>(2, 1 + n_eos) * K;
  // Accumulated log-probabilities of every (beam, token) continuation.
  std::vector<float> acc(static_cast<size_t>(K * V));
  for (int64_t k = 0; k < K; ++k) {
    std::vector<float> s = row_of(logits, row0 + k, V);
    log_softmax(s);
    apply_repetition_penalty(s, st.running[k], cfg.repetition_penalty);
    for (int64_t t = 0; t < V; ++t) acc[k * V + t] = s[t] + st.run_scores[k];
  }
  const std::vector<int64_t> top = top_indices(acc, keep);
  std::vector<float> lp(keep);
  std::vector<int64_t> beam(keep);
  std::vector<int32_t> tok(keep);
  std::vector<char> hits(keep);
  for (int64_t j = 0; j < keep; ++j) {
    lp[j] = acc[top[j]];
    beam[j] = top[j] / V;
    tok[j] = static_cast<int32_t>(top[j] % V);
    hits[j] = eos(tok[j]) || cur + 1 >= max_len;
    if (!hits[j]) *all_hit = false;
  }
  auto candidate = [&](int64_t j) {
    std::vector<int32_t> s = st.running[beam[j]];
    s.push_back(tok[j]);
    return s;
  };
  // The K best continuations that did not stop run on.
  std::vector<float> run_lp(keep);
  for (int64_t j = 0; j < keep; ++j) run_lp[j] = lp[j] + (hits[j] ? kNeg : 0.0f);
  const std::vector<int64_t> next = top_indices(run_lp, K);
  std::vector<std::vector<int32_t>> next_running;
  for (int64_t k = 0; k < K; ++k) {
    next_running.push_back(candidate(next[k]));
    st.run_scores[k] = run_lp[next[k]];
    from[k] = static_cast<int32_t>(beam[next[k]]);
  }
  // The top K candidates that stopped compete for the finished slots.
  const bool all_done =
      std::all_of(st.fin_done.begin(), st.fin_done.end(), [](char d) { return d; });
  const auto penalty =
      static_cast<float>(std::pow(static_cast<double>(cur + 1 - P), cfg.length_penalty));
  std::vector<float> merged(st.fin_scores);
  for (int64_t j = 0; j < keep; ++j) {
    float s = lp[j] / penalty;
    if (all_done && cfg.early_stopping == EarlyStopping::always) s += kNeg;
    if (!st.unsatisfied) s += kNeg;
    if (!(hits[j] && j < K)) s += kNeg;
    merged.push_back(s);
  }
  const std::vector<int64_t> best = top_indices(merged, K);
  std::vector<std::vector<int32_t>> next_finished;
  std::vector<float> next_scores(K);
  std::vector<char> next_done(K);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t m = best[k];
    next_scores[k] = merged[m];
    if (m < K) {
      next_finished.push_back(st.finished[m]);
      next_done[k] = st.fin_done[m];
    } else {
      next_finished.push_back(candidate(m - K));
      next_done[k] = hits[m - K] && m - K < K;
    }
  }
  st.finished = std::move(next_finished);
  st.fin_scores = next_scores;
  st.fin_done = next_done;
  st.running = std::move(next_running);

  // Can a running beam still beat the worst finished one?
  const int64_t best_len = cfg.early_stopping == EarlyStopping::never && cfg.length_penalty > 0
                               ? max_len - P
                               : cur + 1 - P;
  const auto best_possible = static_cast<float>(
      st.run_scores[0] / std::pow(static_cast<double>(best_len), cfg.length_penalty));
  const float worst = *std::min_element(st.fin_scores.begin(), st.fin_scores.end());
  bool improvable = false;
  for (int64_t k = 0; k < K; ++k)
    improvable = improvable || best_possible > (st.fin_done[k] ? worst : kNeg);
  st.unsatisfied = st.unsatisfied && improvable;
}

// transformers' beam search over B prompts x K beams (one cache of B K rows). A prompt whose
// search is settled keeps computing (its finished slots can no longer change) while another
// goes on, as the batched tensors of transformers do; the search stops when no prompt can
// improve, when every finished slot of every prompt is full (early_stopping true), or when
// every candidate of the step stopped.
BatchGenerationResult beam_search(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerationConfig& cfg, const EosTest& eos) {
  const int64_t K = cfg.num_beams, B = static_cast<int64_t>(prompts.size());
  const auto P = static_cast<int64_t>(prompts[0].size());
  const int64_t max_len = P + cfg.max_new_tokens;
  nn::KVCache cache(model.device(), model.kv_cache_shape(), B * K, max_len);
  BatchGenerationResult res;
  res.kv_cache_bytes = cache.bytes();

  std::vector<Beams> beams(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    Beams& st = beams[b];
    st.running.assign(K, prompts[b]);
    st.finished.assign(K, prompts[b]);
    st.run_scores.assign(K, kNeg);
    st.run_scores[0] = 0.0f;  // the K identical prompts: only the first one expands at first
    st.fin_scores.assign(K, kNeg);
    st.fin_done.assign(K, 0);
  }
  const std::vector<int32_t> rows = flatten(prompts, K);
  Tensor logits = model.forward_cached(rows.data(), B * K, P, cache);  // (B K, V)
  const int64_t V = logits.dim(1);
  ++res.forwards;
  std::vector<int32_t> from(static_cast<size_t>(B * K));
  for (int64_t cur = P;; ++cur) {
    bool all_hit = true;
    if (logits.is_meta()) {
      // No values: what the search does on all-equal scores with no eos, without its host work
      // (every beam continues in place; the first candidate to stop is at max_len, where all do).
      std::iota(from.begin(), from.end(), 0);
      all_hit = cur + 1 >= max_len;
    } else {
      for (int64_t b = 0; b < B; ++b) {
        beam_step(beams[b], logits, b * K, V, cur, P, max_len, cfg, eos, &from[b * K], &all_hit);
        for (int64_t k = 0; k < K; ++k) from[b * K + k] += static_cast<int32_t>(b * K);
      }
    }
    logits.reset();
    cache.reorder(from);
    bool unsatisfied = false, every_slot_done = true;
    for (const Beams& st : beams) {
      unsatisfied = unsatisfied || st.unsatisfied;
      for (const char d : st.fin_done) every_slot_done = every_slot_done && d;
    }
    const bool open = !(every_slot_done && cfg.early_stopping == EarlyStopping::always);
    if (!(unsatisfied && open && !all_hit)) break;
    std::vector<int32_t> last;
    for (const Beams& st : beams)
      for (const std::vector<int32_t>& r : st.running) last.push_back(r.back());
    logits = model.forward_cached(last.data(), B * K, 1, cache);
    ++res.forwards;
  }
  for (const Beams& st : beams) {
    GeneratedSequence out;
    out.tokens.assign(st.finished[0].begin() + P, st.finished[0].end());
    out.stopped_at_eos = !out.tokens.empty() && eos(out.tokens.back());
    res.sequences.push_back(std::move(out));
  }
  return res;
}

}  // namespace

BatchGenerationResult generate_batch(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                     const GenerationConfig& cfg,
                                     const std::function<void(int64_t, int32_t)>& on_token) {
  cfg.validate();
  SNUG_CHECK(!prompts.empty(), "generate: no prompt");
  for (const std::vector<int32_t>& p : prompts) {
    SNUG_CHECK(!p.empty(), "generate: the prompt has no tokens");
    SNUG_CHECK(p.size() == prompts[0].size(), "generate: a batch of prompts of ", prompts[0].size(),
               " and ", p.size(),
               " tokens (a batch needs one length: padding masks are not supported yet)");
  }
  for (const int32_t t : cfg.eos_token_ids)
    SNUG_CHECK(t >= 0, "generate: eos token id ", t, " is negative");
  // Meta has no values: no eos is ever "chosen", so the dry run goes to max_new_tokens.
  const bool meta = model.device().is_meta();
  const EosTest eos = [&cfg, meta](int32_t t) { return !meta && is_eos(cfg, t); };
  BatchGenerationResult r;
  if (cfg.num_beams > 1) {
    r = beam_search(model, prompts, cfg, eos);
    if (on_token)
      for (size_t b = 0; b < r.sequences.size(); ++b)
        for (const int32_t t : r.sequences[b].tokens) on_token(static_cast<int64_t>(b), t);
  } else {
    r = greedy_or_sample(model, prompts, cfg, eos, on_token);
  }
  model.free_activations();  // the 16-bit compute copies the generation kept (--bf16/--fp16)
  return r;
}

GenerationResult generate(Model& model, const std::vector<int32_t>& prompt,
                          const GenerationConfig& cfg,
                          const std::function<void(int32_t)>& on_token) {
  std::function<void(int64_t, int32_t)> each;
  if (on_token) each = [&on_token](int64_t, int32_t t) { on_token(t); };
  BatchGenerationResult b = generate_batch(model, {prompt}, cfg, each);
  GenerationResult r;
  r.tokens = std::move(b.sequences[0].tokens);
  r.stopped_at_eos = b.sequences[0].stopped_at_eos;
  r.kv_cache_bytes = b.kv_cache_bytes;
  r.forwards = b.forwards;
  return r;
}

}  // namespace snug
