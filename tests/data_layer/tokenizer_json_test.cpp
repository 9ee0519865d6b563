// JsonTokenizer (data/tokenizer_json.h) against the ids the `tokenizers` package gives
// (tests/golden/gen_tokenizer_golden.py wrote tests/data/tokenizers/), its round trip, and the
// refusal of files it does not implement.
#include "data/tokenizer_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/tokenizers/regex_split.h"
#include "data_layer/expect_error.h"
#include "io/json_input.h"

namespace snug {
namespace {

using nlohmann::json;
using testing_data::error_message;
using testing_data::HasSubstr;

const std::string kDir = std::string(SNUG_TEST_DATA_DIR) + "/tokenizers/";

json fixture(const std::string& name) {
  return json::parse(read_input_file(kDir + name, name));
}

TEST(JsonTokenizer, EveryIdEqualsTokenizersOnEveryText) {
  const json expected = fixture("expected_ids.json");
  ASSERT_EQ(expected["tokenizers"].size(), 3u);
  size_t checked = 0;
  for (const auto& [name, file] : expected["tokenizers"].items()) {
    const JsonTokenizer tok = JsonTokenizer::load(kDir + file.get<std::string>());
    ASSERT_GE(expected["cases"].size(), 25u);
    for (const json& c : expected["cases"]) {
      const std::string text = c["text"].get<std::string>();
      SCOPED_TRACE(name + " on " + c["name"].get<std::string>());
      const std::vector<int32_t> ids = tok.encode(text);
      EXPECT_EQ(ids, c["ids"][name].get<std::vector<int32_t>>());
      // Decoded as tokenizers decodes; and lossless up to the normalizer (NFC in llama3_style)
      // where no prefix space is added.
      const bool differs = c.contains("decoded") && c["decoded"].contains(name);
      EXPECT_EQ(tok.decode(ids), differs ? c["decoded"][name].get<std::string>() : text);
      if (name != "prefix_style") {
        EXPECT_EQ(tok.decode(ids), tok.normalize(text));
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 90u);
}

TEST(JsonTokenizer, SpecialTokensAreMatchedWholeAndCanBeSkipped) {
  const JsonTokenizer tok = JsonTokenizer::load(kDir + "llama3_style.json");
  EXPECT_EQ(tok.encode("<|endoftext|>"), std::vector<int32_t>{0});
  EXPECT_EQ(tok.encode("<|im_start|><|im_end|>"), (std::vector<int32_t>{1, 2}));
  // The normalized added token is not in the model vocabulary: it comes after it.
  EXPECT_EQ(tok.vocab_size(), 1601);
  EXPECT_EQ(tok.encode("[[code]]"), std::vector<int32_t>{1600});
  EXPECT_EQ(tok.token(1600), "[[code]]");
  const std::vector<int32_t> ids = tok.encode("a<|im_end|>b");
  EXPECT_EQ(tok.decode(ids), "a<|im_end|>b");
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), "ab");
}

TEST(JsonTokenizer, BothMergeEncodingsGiveTheSameIds) {
  json pairs = fixture("gpt2_style.json");
  for (json& m : pairs["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    m = json::array({s.substr(0, sp), s.substr(sp + 1)});
  }
  const JsonTokenizer strings = JsonTokenizer::load(kDir + "gpt2_style.json");
  const JsonTokenizer arrays = JsonTokenizer::parse(pairs.dump(), "pairs");
  const std::string text = "안녕하세요 world, it's 2026!\n\tfn main() {}";
  EXPECT_EQ(strings.encode(text), arrays.encode(text));
  EXPECT_GT(strings.encode(text).size(), 5u);
}

TEST(JsonTokenizer, DecodeReplacesIllFormedBytesAndRefusesUnknownIds) {
  const JsonTokenizer tok = JsonTokenizer::load(kDir + "gpt2_style.json");
  // "Ã" (U+00C3) stands for byte 0xC3 and "©" for 0xA9: together they are "é"; alone, 0xC3 is
  // ill-formed and decodes to U+FFFD (tokenizers' lossy UTF-8).
  const auto c3 = tok.token_to_id("\u00c3"), a9 = tok.token_to_id("\u00a9");
  ASSERT_TRUE(c3 && a9);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{*c3, *a9}), "\u00e9");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{*c3}), "\ufffd");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{*a9, *c3, 0}), "\ufffd\ufffd<|endoftext|>");
  EXPECT_FALSE(tok.token_to_id("not a token"));
  const std::string msg = error_message([&] {
    const std::vector<int32_t> bad{5, static_cast<int32_t>(tok.vocab_size())};
    tok.decode(bad);
  });
  EXPECT_TRUE(HasSubstr(msg, "position 1"));
  EXPECT_TRUE(HasSubstr(error_message([&] { tok.encode("ok \xff"); }), "byte 3"));
}

// tokenizers' Split("-", behavior, invert) on "the-final--countdown-" (values printed by the
// tokenizers package, 0.23.3).
TEST(JsonTokenizer, SplitBehaviorsMatchTokenizers) {
  using B = tok::SplitBehavior;
  const tok::SplitPattern dash("-", true, "test");
  const auto run = [&](B b, bool invert) {
    std::vector<std::string> out;
    dash.split("the-final--countdown-", b, invert, out);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(run(B::kRemoved, false), (V{"the", "final", "countdown"}));
  EXPECT_EQ(run(B::kRemoved, true), (V{"-", "-", "-", "-"}));
  EXPECT_EQ(run(B::kIsolated, false), (V{"the", "-", "final", "-", "-", "countdown", "-"}));
  EXPECT_EQ(run(B::kMergedWithPrevious, false), (V{"the-", "final-", "-", "countdown-"}));
  EXPECT_EQ(run(B::kMergedWithPrevious, true), (V{"the", "-final", "-", "-countdown", "-"}));
  EXPECT_EQ(run(B::kMergedWithNext, false), (V{"the", "-final", "-", "-countdown", "-"}));
  EXPECT_EQ(run(B::kMergedWithNext, true), (V{"the-", "final-", "-", "countdown-"}));
  EXPECT_EQ(run(B::kContiguous, false), (V{"the", "-", "final", "--", "countdown", "-"}));
  EXPECT_EQ(run(B::kContiguous, true), (V{"the", "-", "final", "--", "countdown", "-"}));
}

// A hostile or unsupported file is refused with the field named.
std::string refusal(const json& doc) {
  return error_message([&] { JsonTokenizer::parse(doc.dump(), "tokenizer 'bad.json'"); });
}

TEST(JsonTokenizer, RefusesWhatItDoesNotImplementByName) {
  const json gpt2 = fixture("gpt2_style.json");
  const json llama = fixture("llama3_style.json");
  json d = gpt2;
  d["model"]["type"] = "WordPiece";
  std::string m = refusal(d);
  EXPECT_TRUE(HasSubstr(m, "tokenizer 'bad.json'"));
  EXPECT_TRUE(HasSubstr(m, "model.type")) << m;

  d = gpt2;
  d["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}};
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.type"));
  d = llama;
  d["pre_tokenizer"]["pretokenizers"][0]["type"] = "Digits";
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.pretokenizers[0].type"));
  d = llama;
  d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.pretokenizers[0].behavior"));
  d = llama;
  d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.pretokenizers[0].pattern.Regex"));
  d = gpt2;
  d["normalizer"] = {{"type", "NFKC"}};
  EXPECT_TRUE(HasSubstr(refusal(d), "normalizer.type"));
  d = gpt2;
  d["decoder"] = {{"type", "WordPiece"}};
  EXPECT_TRUE(HasSubstr(refusal(d), "decoder.type"));
  d = gpt2;
  d["post_processor"] = {{"type", "TemplateProcessing"}};
  EXPECT_TRUE(HasSubstr(refusal(d), "post_processor.type"));
  d = gpt2;
  d["truncation"] = {{"max_length", 5}};
  EXPECT_TRUE(HasSubstr(refusal(d), "truncation"));
  d = gpt2;
  d["model"]["byte_fallback"] = true;
  EXPECT_TRUE(HasSubstr(refusal(d), "model.byte_fallback"));
  d = gpt2;
  d["model"]["shiny_new_option"] = 1;
  EXPECT_TRUE(HasSubstr(refusal(d), "model.shiny_new_option"));
  d = gpt2;
  d["added_tokens"][0]["lstrip"] = true;
  EXPECT_TRUE(HasSubstr(refusal(d), "added_tokens[0].lstrip"));
  // Fields tokenizers requires are required here too (no guessed default).
  d = gpt2;
  d["pre_tokenizer"].erase("add_prefix_space");
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.add_prefix_space: missing"));
  d = llama;
  d["pre_tokenizer"]["pretokenizers"][0].erase("invert");
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.pretokenizers[0].invert: missing"));
  d = gpt2;
  d["added_tokens"][2].erase("special");
  EXPECT_TRUE(HasSubstr(refusal(d), "added_tokens[2].special: missing"));
  d = gpt2;
  d["added_tokens"][1]["id"] = 7;
  EXPECT_TRUE(HasSubstr(refusal(d), "added_tokens[1].id"));
}

TEST(JsonTokenizer, RefusesMergesAndVocabularyThatDoNotHoldTogether) {
  const json gpt2 = fixture("gpt2_style.json");
  json d = gpt2;
  d["model"]["merges"][5] = "zzz\u00e2 \u0120";
  EXPECT_TRUE(HasSubstr(refusal(d), "model.merges[5]"));
  d = gpt2;
  d["model"]["merges"][6] = std::string(100000, 'q') + " a";  // quoted short, not whole
  const std::string long_token = refusal(d);
  EXPECT_TRUE(HasSubstr(long_token, "model.merges[6]"));
  EXPECT_LT(long_token.size(), 300u);
  d = gpt2;
  d["model"]["merges"][7] = "a b c";
  EXPECT_TRUE(HasSubstr(refusal(d), "model.merges[7]"));
  d = gpt2;
  d["model"]["merges"][3] = json::array({"a", "b"});  // mixed encodings
  EXPECT_TRUE(HasSubstr(refusal(d), "model.merges[3]"));
  d = gpt2;
  d["model"]["vocab"]["!"] = 5;  // two tokens with id 5
  EXPECT_TRUE(HasSubstr(refusal(d), "model.vocab"));
  d = gpt2;
  d["model"]["vocab"]["new"] = 1000000;  // ids with a gap
  EXPECT_TRUE(HasSubstr(refusal(d), "model.vocab"));
}

TEST(JsonTokenizer, RefusesDeepNestingAndNonJson) {
  std::string deep = R"({"version":"1.0","normalizer":)";
  for (int i = 0; i < 10000; ++i) deep += "[";
  EXPECT_TRUE(HasSubstr(error_message([&] { JsonTokenizer::parse(deep, "tokenizer 'deep'"); }),
                        "tokenizer 'deep'"));
  EXPECT_TRUE(HasSubstr(error_message([&] { JsonTokenizer::parse("[1,2]", "tokenizer 'arr'"); }),
                        "tokenizer 'arr'"));
  EXPECT_TRUE(HasSubstr(error_message([&] { JsonTokenizer::load(kDir + "missing.json"); }),
                        "missing.json"));
}

}  // namespace
}  // namespace snug
