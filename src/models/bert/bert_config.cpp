#include "models/bert/bert_config.h"

#include <cmath>

#include "core/error.h"
#include "io/excerpt.h"
#include "models/config_reader.h"
#include "models/presets.h"

namespace snug {

namespace {

struct BertPreset {
  const char* name;
  const char* alias;
  int64_t vocab, positions, hidden, layers, heads, intermediate;
};
// bert-tiny is ours (a test and demo size on the byte-level data); the others are Google's.
constexpr BertPreset kBertPresets[] = {
    {"bert-tiny", "", 256, 256, 128, 2, 4, 512},
    {"bert-base-uncased", "bert-base", 30522, 512, 768, 12, 12, 3072},
    {"bert-large-uncased", "bert-large", 30522, 512, 1024, 24, 16, 4096},
};

const char* arch_name(ModelTask t) {
  return t == ModelTask::sequence_classification ? "BertForSequenceClassification"
                                                 : "BertForMaskedLM";
}

}  // namespace

int64_t BertConfig::num_params() const {
  const int64_t C = hidden_size, I = intermediate_size, V = vocab_size;
  const int64_t embeddings = (V + max_position_embeddings + type_vocab_size) * C + 2 * C;
  const int64_t layer = 4 * (C * C + C) + 2 * C + (C * I + I) + (I * C + C) + 2 * C;
  const int64_t head = task == ModelTask::sequence_classification
                           ? C * C + C + C * num_labels + num_labels  // pooler, classifier
                           : V + C * C + C + 2 * C;  // bias, transform dense and LayerNorm
  return embeddings + num_hidden_layers * layer + head;
}

void BertConfig::validate() const {
  const std::string m = "model '" + name + "'";
  auto positive = [&](int64_t v, const char* key) {
    SNUG_CHECK(v > 0 && v <= kMaxConfigDim, m, ": ", key, " ", v, " must be in [1, ", kMaxConfigDim,
               "]");
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(intermediate_size, "intermediate_size");
  positive(max_position_embeddings, "max_position_embeddings");
  positive(type_vocab_size, "type_vocab_size");
  SNUG_CHECK(hidden_size % num_attention_heads == 0, m, ": hidden_size ", hidden_size,
             " is not a multiple of num_attention_heads ", num_attention_heads);
  auto prob = [&](double p, const char* key) {
    SNUG_CHECK(std::isfinite(p) && p >= 0 && p < 1, m, ": ", key, " ", p, " must be in [0, 1)");
  };
  prob(hidden_dropout_prob, "hidden_dropout_prob");
  prob(attention_probs_dropout_prob, "attention_probs_dropout_prob");
  if (classifier_dropout >= 0) prob(classifier_dropout, "classifier_dropout");
  SNUG_CHECK(std::isfinite(layer_norm_eps) && layer_norm_eps > 0, m, ": layer_norm_eps ",
             layer_norm_eps, " must be positive and finite");
  SNUG_CHECK(std::isfinite(initializer_range) && initializer_range >= 0, m, ": initializer_range ",
             initializer_range, " must be finite and not negative");
  SNUG_CHECK(pad_token_id >= 0 && pad_token_id < vocab_size, m, ": pad_token_id ", pad_token_id,
             " is outside the vocabulary [0, ", vocab_size, ")");
  SNUG_CHECK(num_labels >= 2 && num_labels <= kMaxConfigDim, m, ": num_labels ", num_labels,
             " must be at least 2 (single-label classification; regression is not supported)");
  SNUG_CHECK(task != ModelTask::causal_lm, m,
             ": BERT is an encoder: its tasks are masked-lm and sequence-classification");
  const long double C = static_cast<long double>(hidden_size);
  const long double approx = static_cast<long double>(num_hidden_layers) *
                                 (4 * C * C + 2 * C * static_cast<long double>(intermediate_size)) +
                             static_cast<long double>(vocab_size + max_position_embeddings) * C;
  SNUG_CHECK(approx <= 0x1p58L, m, ": about ", static_cast<double>(approx),
             " parameters, out of range (at most 2^58)");
}

BertConfig parse_bert_config(const nlohmann::json& j, const std::string& spec,
                             const std::string& name) {
  const ConfigKeys k(j, spec, true);
  BertConfig c;
  c.name = name;
  auto refuse_true = [&](const char* key) {
    if (!j.contains(key)) return;
    SNUG_CHECK(j[key].is_boolean(), spec, ": key '", key, "' must be true or false");
    SNUG_CHECK(!j[key].get<bool>(), spec, ": ", key, " true is not supported (BERT here is an ",
               "encoder without cross-attention)");
  };
  k.integer("vocab_size", c.vocab_size, true);
  k.integer("hidden_size", c.hidden_size, true);
  k.integer("num_hidden_layers", c.num_hidden_layers, true);
  k.integer("num_attention_heads", c.num_attention_heads, true);
  k.integer("intermediate_size", c.intermediate_size, true);
  k.integer("max_position_embeddings", c.max_position_embeddings, false);
  k.integer("type_vocab_size", c.type_vocab_size, false);
  k.integer("pad_token_id", c.pad_token_id, false);
  k.number("hidden_dropout_prob", c.hidden_dropout_prob);
  k.number("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  k.number("classifier_dropout", c.classifier_dropout);
  k.number("initializer_range", c.initializer_range);
  double eps = c.layer_norm_eps;
  k.number("layer_norm_eps", eps);
  c.layer_norm_eps = static_cast<float>(eps);
  const std::string act = k.string("hidden_act", "gelu");
  SNUG_CHECK(act == "gelu", spec, ": hidden_act '", excerpt(act),
             "' is not supported (BERT's 'gelu', the exact erf form)");
  const std::string pos = k.string("position_embedding_type", "absolute");
  SNUG_CHECK(pos == "absolute", spec, ": position_embedding_type '", excerpt(pos),
             "' is not supported (only 'absolute')");
  refuse_true("is_decoder");
  refuse_true("add_cross_attention");
  if (j.contains("tie_word_embeddings")) {
    SNUG_CHECK(j["tie_word_embeddings"].is_boolean() && j["tie_word_embeddings"].get<bool>(), spec,
               ": tie_word_embeddings false is not supported (the MLM decoder is tied)");
  }
  if (j.contains("architectures") && !j["architectures"].is_null()) {
    const nlohmann::json& a = j["architectures"];
    SNUG_CHECK(a.is_array() && a.size() == 1 && a[0].is_string(), spec,
               ": key 'architectures' must be a list of one class name");
    const std::string cls = a[0].get<std::string>();
    if (cls == "BertForSequenceClassification")
      c.task = ModelTask::sequence_classification;
    else if (cls == "BertForMaskedLM" || cls == "BertForPreTraining" || cls == "BertModel")
      c.task = ModelTask::masked_lm;  // the pre-trained checkpoints' encoder + MLM head
    else
      throw Error(detail::concat(spec, ": architectures '", excerpt(cls),
                                 "' is not supported (BertForMaskedLM, "
                                 "BertForSequenceClassification)"));
  }
  if (j.contains("id2label") && j["id2label"].is_object()) {
    c.num_labels = static_cast<int64_t>(j["id2label"].size());
  }
  k.integer("num_labels", c.num_labels, false);
  if (j.contains("problem_type") && !j["problem_type"].is_null()) {
    const std::string pt = k.string("problem_type", "");
    SNUG_CHECK(pt == "single_label_classification", spec, ": problem_type '", excerpt(pt),
               "' is not supported (single_label_classification)");
  }
  c.validate();
  return c;
}

nlohmann::json bert_config_json(const BertConfig& c) {
  nlohmann::json j = {{"model_type", "bert"},
                      {"architectures", {arch_name(c.task)}},
                      {"vocab_size", c.vocab_size},
                      {"hidden_size", c.hidden_size},
                      {"num_hidden_layers", c.num_hidden_layers},
                      {"num_attention_heads", c.num_attention_heads},
                      {"intermediate_size", c.intermediate_size},
                      {"hidden_act", "gelu"},
                      {"hidden_dropout_prob", c.hidden_dropout_prob},
                      {"attention_probs_dropout_prob", c.attention_probs_dropout_prob},
                      {"max_position_embeddings", c.max_position_embeddings},
                      {"type_vocab_size", c.type_vocab_size},
                      {"layer_norm_eps", c.layer_norm_eps},
                      {"initializer_range", c.initializer_range},
                      {"pad_token_id", c.pad_token_id},
                      {"position_embedding_type", "absolute"},
                      {"classifier_dropout", nullptr},
                      {"num_labels", c.num_labels}};
  if (c.classifier_dropout >= 0) j["classifier_dropout"] = c.classifier_dropout;
  nlohmann::json id2label = nlohmann::json::object();
  for (int64_t i = 0; i < c.num_labels; ++i)
    id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
  j["id2label"] = id2label;
  return j;
}

const std::vector<std::pair<std::string, std::string>>& bert_presets() {
  static const auto names = preset_names(kBertPresets);
  return names;
}

nlohmann::json bert_preset_config(const std::string& name) {
  const BertPreset& p = find_preset(kBertPresets, name, "BERT");
  return bert_config_json({.name = p.name,
                           .vocab_size = p.vocab,
                           .hidden_size = p.hidden,
                           .num_hidden_layers = p.layers,
                           .num_attention_heads = p.heads,
                           .intermediate_size = p.intermediate,
                           .max_position_embeddings = p.positions});
}

BertConfig bert_config(const ModelConfig& cfg) {
  SNUG_CHECK(cfg.shape.model_type == "bert", "model '", cfg.shape.name, "' is ",
             cfg.shape.model_type, ", not bert");
  BertConfig c = parse_bert_config(cfg.hf, cfg.shape.name, cfg.shape.name);
  c.task = cfg.task;
  if (cfg.num_labels > 0) c.num_labels = cfg.num_labels;
  c.validate();
  return c;
}

int64_t bert_mask_token_id(const BertConfig& c) {
  return c.vocab_size > 103 ? 103 : c.vocab_size - 1;
}

}  // namespace snug
