// The entry points the fuzz targets (fuzz/*_fuzz.cpp, libFuzzer, clang) and the corpus replay
// test (tests/fuzz/corpus_replay_test.cpp, any compiler) drive with the same bytes. Each feeds
// `data` to one reader of untrusted input as snug reads it and returns normally when the reader
// accepts it or refuses it with snug::Error; anything else (another exception, a crash, a
// sanitizer report) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>

namespace snug::fuzz {

// SafetensorsFile (io/safetensors.h) on a file holding `data`; reads every float and integer
// tensor it accepts.
void safetensors_file(const uint8_t* data, size_t size);
// parse_model_config (models/registry.h): a Hugging Face config.json, by its family.
void model_config(const uint8_t* data, size_t size);
// open_dataset (data/dataset.h) on a file holding `data` (a token file, or else byte-level
// text); reads every token.
void token_file(const uint8_t* data, size_t size);

// parse_trainer_state (train/trainer_state.h) on `data` as checkpoint-3/trainer_state.json, then
// the run-record checks of a resume (train/run_record.h); and the same once more with the
// document's checksum recomputed, so that mutations reach the checks behind it.
void trainer_state(const uint8_t* data, size_t size);

// JsonTokenizer::parse (data/tokenizer_json.h) on `data` as a tokenizer.json; when accepted,
// encodes and decodes a few fixed texts and the input's own bytes.
void tokenizer_json(const uint8_t* data, size_t size);

// load_sft_data (data/sft_data.h) on a file holding `data` as jsonl records, with a small
// byte-level tokenizer and one of the known chat templates (by the input's size), with and
// without --assistant-only-loss; the examples it accepts are then batched padded and packed
// (data/batches.h).
void jsonl_records(const uint8_t* data, size_t size);

// An adapter folder as `snug generate --adapter DIR` reads it: read_peft_adapter_config,
// adopt_peft_adapter, then load_peft_adapter onto a small model (llama-tiny or gpt2-tiny shrunk
// to one narrow layer, by the first byte). `data`: a 2-byte little-endian length L, L bytes of
// adapter_config.json, then the rest as adapter_model.safetensors (fuzz/make_adapter_seeds.py
// writes such inputs). Returns whether the adapter loaded (for the corpus test's known seeds).
bool adapter_folder(const uint8_t* data, size_t size);

}  // namespace snug::fuzz
