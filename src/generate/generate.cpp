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

// Row b of (B,V) logits on the host (zeros on meta, which has no values).
std::vector<float> row_of(const Tensor& logits, int64_t b, int64_t V) {
  std::vector<float> r(static_cast<size_t>(V), 0.0f);
  if (const float* p = logits.is_meta() ? nullptr : logits.data<float>())
    std::copy(p + b * V, p + (b + 1) * V, r.begin());
  return r;
}

bool is_eos(const GenerationConfig& cfg, int32_t t) {
  return std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), t) !=
         cfg.eos_token_ids.end();
}

// Uniform in [0, 1) from (seed, draw): counter-based, the same on every platform.
double uniform(uint64_t seed, uint64_t draw) {
  const uint64_t x = splitmix64_mix(seed ^ splitmix64_mix(draw + 0x9e3779b97f4a7c15ull));
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

GenerationResult greedy_or_sample(CausalLM& model, const std::vector<int32_t>& prompt,
                                  const GenerationConfig& cfg,
                                  const std::function<void(int32_t)>& on_token) {
  const int64_t P = static_cast<int64_t>(prompt.size());
  nn::KVCache cache(model.device(), model.kv_cache_shape(), 1, P + cfg.max_new_tokens);
  GenerationResult res;
  res.kv_cache_bytes = cache.bytes();
  std::vector<int32_t> seq = prompt;
  Tensor logits = model.forward_cached(prompt.data(), 1, P, cache);
  const int64_t V = logits.dim(1);
  ++res.forwards;
  for (int64_t step = 0;; ++step) {
    std::vector<float> s = row_of(logits, 0, V);
    logits.reset();
    apply_repetition_penalty(s, seq, cfg.repetition_penalty);
    int32_t tok;
    if (cfg.do_sample) {
      apply_temperature(s, cfg.temperature);
      apply_top_k(s, cfg.top_k);
      apply_top_p(s, cfg.top_p);
      tok = sample_from(s, uniform(cfg.seed, static_cast<uint64_t>(step)));
    } else {
      tok = argmax(s);
    }
    seq.push_back(tok);
    res.tokens.push_back(tok);
    if (on_token) on_token(tok);
    if (is_eos(cfg, tok)) {
      res.stopped_at_eos = true;
      break;
    }
    if (step + 1 == cfg.max_new_tokens) break;
    logits = model.forward_cached(&tok, 1, 1, cache);
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

// transformers' beam search (GenerationMixin._beam_search) for one prompt: keep
// max(2, 1 + #eos) x K candidates per step, continue the best K that did not stop, and let the
// top K candidates that did stop compete for the K finished slots with their length-penalized
// scores; stop when no running beam can beat the finished ones (early_stopping's heuristic),
// when every finished slot is full (early_stopping true), or when every candidate stopped.
GenerationResult beam_search(CausalLM& model, const std::vector<int32_t>& prompt,
                             const GenerationConfig& cfg) {
  const int64_t K = cfg.num_beams, P = static_cast<int64_t>(prompt.size());
  const int64_t max_len = P + cfg.max_new_tokens;
  const int64_t n_eos = static_cast<int64_t>(cfg.eos_token_ids.size());
  const int64_t keep = std::max<int64_t>(2, 1 + n_eos) * K;
  constexpr float kNeg = -1.0e9f;
  nn::KVCache cache(model.device(), model.kv_cache_shape(), K, max_len);
  GenerationResult res;
  res.kv_cache_bytes = cache.bytes();

  std::vector<std::vector<int32_t>> running(K, prompt), finished(K, prompt);
  std::vector<float> run_scores(K, kNeg), fin_scores(K, kNeg);
  run_scores[0] = 0.0f;  // the K identical prompts: only the first one expands at first
  std::vector<char> fin_done(K, 0);
  bool unsatisfied = true;  // the early-stop heuristic: running beams may still win

  std::vector<int32_t> rows;
  for (int64_t k = 0; k < K; ++k) rows.insert(rows.end(), prompt.begin(), prompt.end());
  Tensor logits = model.forward_cached(rows.data(), K, P, cache);
  const int64_t V = logits.dim(1);
  ++res.forwards;
  for (int64_t cur = P;; ++cur) {
    // Accumulated log-probabilities of every (beam, token) continuation.
    std::vector<float> acc(static_cast<size_t>(K * V));
    for (int64_t k = 0; k < K; ++k) {
      std::vector<float> s = row_of(logits, k, V);
      log_softmax(s);
      apply_repetition_penalty(s, running[k], cfg.repetition_penalty);
      for (int64_t t = 0; t < V; ++t) acc[k * V + t] = s[t] + run_scores[k];
    }
    logits.reset();
    const std::vector<int64_t> top = top_indices(acc, keep);
    std::vector<float> lp(keep);
    std::vector<int64_t> beam(keep);
    std::vector<int32_t> tok(keep);
    std::vector<char> hits(keep);
    for (int64_t j = 0; j < keep; ++j) {
      lp[j] = acc[top[j]];
      beam[j] = top[j] / V;
      tok[j] = static_cast<int32_t>(top[j] % V);
      hits[j] = is_eos(cfg, tok[j]) || cur + 1 >= max_len;
    }
    auto candidate = [&](int64_t j) {
      std::vector<int32_t> s = running[beam[j]];
      s.push_back(tok[j]);
      return s;
    };
    // The K best continuations that did not stop run on.
    std::vector<float> run_lp(keep);
    for (int64_t j = 0; j < keep; ++j) run_lp[j] = lp[j] + (hits[j] ? kNeg : 0.0f);
    const std::vector<int64_t> next = top_indices(run_lp, K);
    std::vector<std::vector<int32_t>> next_running;
    std::vector<int32_t> from(K);
    for (int64_t k = 0; k < K; ++k) {
      next_running.push_back(candidate(next[k]));
      run_scores[k] = run_lp[next[k]];
      from[k] = static_cast<int32_t>(beam[next[k]]);
    }
    // The top K candidates that stopped compete for the finished slots.
    const bool all_done = std::all_of(fin_done.begin(), fin_done.end(), [](char d) { return d; });
    const auto penalty =
        static_cast<float>(std::pow(static_cast<double>(cur + 1 - P), cfg.length_penalty));
    std::vector<float> merged(fin_scores);
    for (int64_t j = 0; j < keep; ++j) {
      float s = lp[j] / penalty;
      if (all_done && cfg.early_stopping == EarlyStopping::always) s += kNeg;
      if (!unsatisfied) s += kNeg;
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
        next_finished.push_back(finished[m]);
        next_done[k] = fin_done[m];
      } else {
        next_finished.push_back(candidate(m - K));
        next_done[k] = hits[m - K] && m - K < K;
      }
    }
    finished = std::move(next_finished);
    fin_scores = next_scores;
    fin_done = next_done;
    running = std::move(next_running);
    cache.reorder(from);

    // Can a running beam still beat the worst finished one?
    const int64_t best_len = cfg.early_stopping == EarlyStopping::never && cfg.length_penalty > 0
                                 ? max_len - P
                                 : cur + 1 - P;
    const auto best_possible = static_cast<float>(
        run_scores[0] / std::pow(static_cast<double>(best_len), cfg.length_penalty));
    const float worst = *std::min_element(fin_scores.begin(), fin_scores.end());
    bool improvable = false;
    for (int64_t k = 0; k < K; ++k)
      improvable = improvable || best_possible > (fin_done[k] ? worst : kNeg);
    unsatisfied = unsatisfied && improvable;
    const bool every_slot_done =
        std::all_of(fin_done.begin(), fin_done.end(), [](char d) { return d; });
    const bool open = !(every_slot_done && cfg.early_stopping == EarlyStopping::always);
    const bool continuable = !std::all_of(hits.begin(), hits.end(), [](char h) { return h; });
    if (!(unsatisfied && open && continuable)) break;
    std::vector<int32_t> last(K);
    for (int64_t k = 0; k < K; ++k) last[k] = running[k].back();
    logits = model.forward_cached(last.data(), K, 1, cache);
    ++res.forwards;
  }
  res.tokens.assign(finished[0].begin() + P, finished[0].end());
  res.stopped_at_eos = !res.tokens.empty() && is_eos(cfg, res.tokens.back());
  return res;
}

}  // namespace

GenerationResult generate(CausalLM& model, const std::vector<int32_t>& prompt,
                          const GenerationConfig& cfg,
                          const std::function<void(int32_t)>& on_token) {
  cfg.validate();
  SNUG_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  for (const int32_t t : cfg.eos_token_ids)
    SNUG_CHECK(t >= 0, "generate: eos token id ", t, " is negative");
  if (cfg.num_beams > 1) {
    GenerationResult r = beam_search(model, prompt, cfg);
    if (on_token)
      for (const int32_t t : r.tokens) on_token(t);
    return r;
  }
  return greedy_or_sample(model, prompt, cfg, on_token);
}

}  // namespace snug
