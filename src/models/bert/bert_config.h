// BERT shapes (Hugging Face BertConfig): the presets, any config.json with model_type "bert",
// closed-form parameter counts per head.
//
// Keys read (any other key of a config.json is ignored unless it changes the model: those are
// refused by name, e.g. position_embedding_type other than "absolute", hidden_act other than
// "gelu", is_decoder true): vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
// intermediate_size, hidden_act, hidden_dropout_prob, attention_probs_dropout_prob,
// max_position_embeddings, type_vocab_size, layer_norm_eps, initializer_range, pad_token_id,
// classifier_dropout, architectures (BertForMaskedLM or BertForSequenceClassification: the head),
// id2label / num_labels (the classifier's classes), tie_word_embeddings.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/model_config.h"

namespace snug {

struct BertConfig {
  std::string name;
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;  // C
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;  // I
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  double classifier_dropout = -1;  // < 0: null (hidden_dropout_prob)
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  float layer_norm_eps = 1e-12f;
  double initializer_range = 0.02;
  int64_t pad_token_id = 0;
  ModelTask task = ModelTask::masked_lm;  // from architectures
  int64_t num_labels = 2;                 // sequence classification

  double pooler_dropout() const {
    return classifier_dropout >= 0 ? classifier_dropout : hidden_dropout_prob;
  }
  // Parameters of the task's model (the MLM decoder tied to the word embeddings: counted once).
  int64_t num_params() const;
  void validate() const;  // throws snug::Error naming the model and the key
};

BertConfig parse_bert_config(const nlohmann::json& j, const std::string& spec,
                             const std::string& name);
// BertConfig as config.json keys (what save_pretrained writes for the task's class).
nlohmann::json bert_config_json(const BertConfig& c);
const std::vector<std::pair<std::string, std::string>>& bert_presets();
nlohmann::json bert_preset_config(const std::string& name);
// The BERT shape of a resolved bert ModelConfig, with its task and num_labels.
BertConfig bert_config(const ModelConfig& cfg);
// [MASK]'s id for the masked-LM collator: 103 in the bert-*-uncased/cased WordPiece vocabularies;
// a vocabulary of at most 103 ids (tiny test models) uses its last id.
int64_t bert_mask_token_id(const BertConfig& c);

}  // namespace snug
