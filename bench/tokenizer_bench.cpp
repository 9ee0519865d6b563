// JsonTokenizer::encode throughput on one thread, on the parity fixtures' texts (the Korean
// seed slices, a code file, the multilingual corpus) joined into one document. Its peer is
// bench/tokenizer_bench.py (the tokenizers package on the same text, one thread); compare
// bytes_per_second of the two from one run on an idle machine (docs/tokenizers.md).
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <string>

#include "data/tokenizer_json.h"
#include "io/json_input.h"

namespace {

const std::string kDir = std::string(SNUG_SOURCE_DIR) + "/tests/fixtures/tokenizers/";

std::string corpus() {
  const nlohmann::json j =
      nlohmann::json::parse(snug::read_input_file(kDir + "expected_ids.json", "fixture"));
  std::string text;
  for (const auto& c : j["cases"]) text += c["text"].get<std::string>() + "\n";
  return text;
}

void BM_Encode(benchmark::State& state, const char* file) {
  const snug::JsonTokenizer tok = snug::JsonTokenizer::load(kDir + file);
  const std::string text = corpus();
  size_t n = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tok.encode(text, /*add_special_tokens=*/false);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n);
}

BENCHMARK_CAPTURE(BM_Encode, gpt2_style, "gpt2_style.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama3_style, "llama3_style.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, bert_wordpiece, "bert_wordpiece.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, sp_llama2, "sp_llama2.json")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
