// `snug tokenize`: a tokenizer.json (data/tokenizer_json.h) on a text or a file. Encoding prints
// one line per token, "id<TAB>token" (the token as the vocabulary spells it, byte-level alphabet
// included, as tokenizers' Encoding.tokens), then a count; --ids-only prints the ids on one line.
// --decode reads ids (separated by spaces, commas or newlines) and prints the text.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "data/tokenizer_json.h"
#include "io/json_input.h"

namespace snug::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string text;
  std::string file;
  bool decode = false;
  bool ids_only = false;
};

std::vector<int32_t> parse_ids(const std::string& s, const std::string& what) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == ',' || c == '\n' || c == '\r' || c == '\t') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9' && j - i < 10) ++j;
    const bool ends =
        j == s.size() || s[j] == ' ' || s[j] == ',' || s[j] == '\n' || s[j] == '\r' || s[j] == '\t';
    SNUG_CHECK(j > i && ends && std::stoll(s.substr(i, j - i)) <= INT32_MAX, what, ": '",
               s.substr(i, std::min<size_t>(20, s.size() - i)), "' at byte ", i,
               " is not a token id (ids are non-negative integers)");
    ids.push_back(static_cast<int32_t>(std::stoll(s.substr(i, j - i))));
    i = j;
  }
  return ids;
}

int run_tokenize(const TokenizeArgs& a) {
  const JsonTokenizer tok = JsonTokenizer::load(a.tokenizer);
  const std::string input =
      a.file.empty() ? a.text : read_input_file(a.file, "--file '" + a.file + "'");
  if (a.decode) {
    const std::vector<int32_t> ids =
        parse_ids(input, a.file.empty() ? "--text" : "--file '" + a.file + "'");
    const std::string text = tok.decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
    return 0;
  }
  const std::vector<int32_t> ids = tok.encode(input);
  if (a.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    return 0;
  }
  for (const int32_t id : ids) std::printf("%d\t%s\n", id, tok.token(id).c_str());
  std::printf("%zu tokens, %zu bytes\n", ids.size(), input.size());
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  const auto [sub, a] = add_subcommand<TokenizeArgs>(
      app, "tokenize",
      "Encode text with a tokenizer.json (byte-level BPE, WordPiece, SentencePiece-style BPE), "
      "or decode ids");
  sub->add_option("--tokenizer", a->tokenizer, "A Hugging Face tokenizer.json")
      ->required()
      ->check(CLI::ExistingFile);
  auto* text = sub->add_option("--text", a->text, "The text to encode (ids with --decode)");
  auto* file =
      sub->add_option("--file", a->file, "A file to encode (ids with --decode)")->excludes(text);
  text->excludes(file);
  sub->add_flag("--decode", a->decode, "Read token ids and print the text they decode to");
  sub->add_flag("--ids-only", a->ids_only, "Print only the ids, on one line")->excludes("--decode");
  return {sub, [a = a, text, file] {
            SNUG_CHECK(text->count() + file->count() == 1, "snug tokenize: give --text or --file");
            return run_tokenize(*a);
          }};
}

}  // namespace snug::cli
