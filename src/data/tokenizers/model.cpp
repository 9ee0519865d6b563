// parse_model (data/tokenizers/vocab.h): the model kinds snug implements, one entry each.
#include "data/tokenizers/bpe.h"
#include "data/tokenizers/unicode.h"
#include "data/tokenizers/wordpiece.h"

namespace snug::tok {

std::unique_ptr<Model> parse_model(const Fields& f) {
  const std::string type = f.string("type");
  if (type == "BPE") return std::make_unique<BpeModel>(f);
  if (type == "WordPiece") return std::make_unique<WordPieceModel>(f);
  f.refuse("type", "model '" + shorten(type) + "' not supported by snug (BPE, WordPiece)");
}

}  // namespace snug::tok
