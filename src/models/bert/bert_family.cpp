// BERT's entry in the registry of model families (models/registry.h).
#include <cstdint>

#include "models/bert/bert.h"
#include "models/bert/bert_config.h"
#include "models/family.h"

namespace snug {

namespace {

ModelConfig to_model_config(const BertConfig& c) {
  ModelConfig m = common_shape_config(c, "bert", bert_config_json(c));
  m.task = c.task;
  m.num_labels = c.num_labels;
  m.mask_token_id = bert_mask_token_id(c);
  return m;
}

ModelConfig bert_from_json(const nlohmann::json& j, const std::string& spec,
                           const std::string& name) {
  return to_model_config(parse_bert_config(j, spec, name));
}

ModelConfig set_task(const ModelConfig& cfg, ModelTask task, int64_t num_labels) {
  BertConfig c = parse_bert_config(cfg.hf, cfg.shape.name, cfg.shape.name);
  c.task = task;
  if (num_labels > 0) c.num_labels = num_labels;
  c.validate();
  return to_model_config(c);
}

// A transformers BERT file may also hold the MLM decoder tied to the word embeddings (accepted
// only equal to them), its bias (the same tensor as cls.predictions.bias: transformers ties it)
// and the position_ids / token_type_ids buffers. The checkpoints people start from are rarely of
// the task they train: bert-base-uncased is a pre-training checkpoint (MLM and next-sentence
// heads, a pooler, TF-era LayerNorm gamma/beta), a sentence-transformers folder is a bare
// BertModel (no "bert." prefix, no head). As BertFor*.from_pretrained does, the task's own head
// may be absent (initialized from the seed) and the other heads are dropped, both reported; the
// encoder itself must be complete.
HfWeightRules bert_hf_rules(const Model& model) {
  const Bert& m = family_model<Bert>(model);
  HfWeightRules r;
  r.model_desc = m.config().name + " (BERT, " + task_name(m.config().task) + ")";
  r.optional_prefix = "bert.";
  r.legacy_norm_names = true;
  r.ignored_suffixes = {"embeddings.position_ids", "embeddings.token_type_ids",
                        "cls.predictions.decoder.bias"};
  r.unused_prefixes = {"cls.seq_relationship."};
  if (m.config().task == ModelTask::masked_lm) {
    r.tied_name = "cls.predictions.decoder.weight";
    r.tied_to = "bert.embeddings.word_embeddings.weight";
    r.tie_note = "snug ties BERT's MLM decoder to the word embeddings";
    r.fresh_prefixes = {"cls.predictions."};  // BertForMaskedLM has no pooler
    r.unused_prefixes.insert(r.unused_prefixes.end(), {"bert.pooler.", "classifier."});
  } else {
    r.fresh_prefixes = {"classifier.", "bert.pooler."};
    r.unused_prefixes.push_back("cls.predictions.");
  }
  return r;
}

// Per token: 4 C^2 (q, k, v, o) + 2 C I (intermediate, output) per layer, 2 FLOPs each; the MLM
// head C^2 + V C (the classifier's per-row cost is negligible); bidirectional attention 4 T C
// per layer (QK^T and PV over all T keys).
FlopsPerToken flops_per_token(const ModelConfig& cfg, int64_t T) {
  const BertConfig c = bert_config(cfg);
  const double L = static_cast<double>(c.num_hidden_layers);
  const double C = static_cast<double>(c.hidden_size);
  const double I = static_cast<double>(c.intermediate_size);
  FlopsPerToken f;
  f.layer_gemm = 2.0 * L * (4.0 * C * C + 2.0 * C * I);
  f.head =
      c.task == ModelTask::masked_lm ? 2.0 * (C * C + static_cast<double>(c.vocab_size) * C) : 0.0;
  f.attention = 4.0 * L * static_cast<double>(T) * C;
  return f;
}

// One encoder layer keeps, per token and hidden unit, e bytes for each of its input, q, k, v, the
// attention output, the LayerNorm inputs h1 and h2, n1, and 4 + 4 for the intermediate pre- and
// post-activation (I = 4h), plus two one-byte hidden dropout masks: s b h (16 e + 2), Korthikanti
// et al. 2022's count with dropout; with the scores kept (naive attention) the probabilities, the
// one-byte mask and the dropped probabilities, a s^2 b (2 e + 1): gpt_block_activation_bytes
// (models/family.h).

}  // namespace

const Architecture& bert_architecture() {
  static const Architecture a{.model_type = "bert",
                              .presets = bert_presets(),
                              .preset_config = bert_preset_config,
                              .parse = bert_from_json,
                              .create = create_model_as<Bert, bert_config>,
                              .weight_rules = bert_hf_rules,
                              .flops_per_token = flops_per_token,
                              .layer_activation_bytes = gpt_block_activation_bytes,
                              .tasks = {ModelTask::masked_lm, ModelTask::sequence_classification},
                              .set_task = set_task,
                              .hf_class = nullptr,  // architectures comes from the task (set_task)
                              .default_lora_targets = "query,value"};
  return a;
}

}  // namespace snug
