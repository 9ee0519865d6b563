// JsonTokenizer (data/tokenizer_json.h) against the ids the `tokenizers` package gives
// (tests/golden/gen_tokenizer_golden.py wrote tests/fixtures/tokenizers/), its round trip, and the
// refusal of files it does not implement.
#include "data/tokenizer_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/tokenizers/regex_split.h"
#include "io/json_input.h"
#include "support/expect_error.h"

namespace snug {
namespace {
namespace tokenizer_json_test {

using nlohmann::json;
using testing_data::error_message;
using testing_data::HasSubstr;

const std::string kDir = std::string(SNUG_TEST_DATA_DIR) + "/tokenizers/";

json fixture(const std::string& name) {
  return json::parse(read_input_file(kDir + name, name));
}

// Kinds whose decode gives back the normalized text (no prefix space added, no spacing or
// clean-up of the decoder): decode(encode(x)) == normalize(x) holds for them.
bool decodes_to_normalized(const std::string& name) {
  return name == "gpt2_style" || name == "llama3_style";
}

TEST(JsonTokenizer, EveryIdEqualsTokenizersOnEveryText) {
  const json expected = fixture("expected_ids.json");
  ASSERT_EQ(expected["tokenizers"].size(), 8u);
  size_t checked = 0;
  for (const auto& [name, file] : expected["tokenizers"].items()) {
    const JsonTokenizer tok = JsonTokenizer::load(kDir + file.get<std::string>());
    ASSERT_GE(expected["cases"].size(), 32u);
    for (const json& c : expected["cases"]) {
      const std::string text = c["text"].get<std::string>();
      SCOPED_TRACE(name + " on " + c["name"].get<std::string>());
      const std::vector<int32_t> ids = tok.encode(text);
      EXPECT_EQ(ids, c["ids"][name].get<std::vector<int32_t>>());
      // Decoded as tokenizers decodes, with special tokens and without (its default).
      const auto decoded = [&](const char* key) {
        const bool differs = c.contains(key) && c[key].contains(name);
        return differs ? c[key][name].get<std::string>() : text;
      };
      EXPECT_EQ(tok.decode(ids), decoded("decoded"));
      EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), decoded("decoded_skip"));
      if (decodes_to_normalized(name)) {
        EXPECT_EQ(tok.decode(ids), tok.normalize(text));
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 256u);
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

// Llama 3's layout: <|begin_of_text|> from the TemplateProcessing inside a post-processor
// Sequence (values printed by the tokenizers package, 0.23.3).
TEST(JsonTokenizer, Llama3TemplatePutsBeginOfTextFirst) {
  const JsonTokenizer tok = JsonTokenizer::load(kDir + "llama3_shipped.json");
  const int32_t bos = *tok.token_to_id("<|begin_of_text|>");
  EXPECT_EQ(bos, 900);
  const std::string chat = "<|start_header_id|>user<|end_header_id|>\n\n\uc548\ub155<|eot_id|>";
  const std::vector<int32_t> ids = tok.encode(chat);
  std::vector<int32_t> without = tok.encode(chat, /*add_special_tokens=*/false);
  without.insert(without.begin(), bos);
  EXPECT_EQ(ids, without);
  EXPECT_EQ(ids.front(), 900);
  EXPECT_EQ(tok.decode(ids), "<|begin_of_text|>" + chat);
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), "user\n\n\uc548\ub155");
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

// Values printed by the tokenizers package (0.23.3) for the committed bert_wordpiece.json.
TEST(JsonTokenizer, WordPieceMatchesTokenizersOnItsEdges) {
  const JsonTokenizer tok = JsonTokenizer::load(kDir + "bert_wordpiece.json");
  using V = std::vector<int32_t>;
  const int32_t cls = *tok.token_to_id("[CLS]"), sep = *tok.token_to_id("[SEP]");
  const int32_t unk = *tok.token_to_id("[UNK]");
  // Special tokens around the ids by default (tokenizers' add_special_tokens=True), not without.
  const V plain = tok.encode("Hello, LoRA!", false);
  V framed{cls};
  framed.insert(framed.end(), plain.begin(), plain.end());
  framed.push_back(sep);
  EXPECT_EQ(tok.encode("Hello, LoRA!"), framed);
  EXPECT_EQ(tok.encode(""), (V{cls, sep}));
  EXPECT_EQ(tok.encode("", false), V{});
  // A word longer than max_input_chars_per_word (40), or with a character outside the
  // vocabulary, is one [UNK]; the words around it are not touched.
  const V a = tok.encode("a", false);
  EXPECT_EQ(tok.encode(std::string(41, 'a') + " a", false), (V{unk, a[0]}));
  EXPECT_EQ(tok.encode("\U0001F600 a", false), (V{unk, a[0]}));
  // BertNormalizer: controls dropped, accents stripped, lowercased, CJK ideographs spaced.
  EXPECT_EQ(tok.normalize("A\u200bB\tC\u00e9\u4e2d\u0130"), "ab ce \u4e2d i");
  // Without accent stripping, U+0130 lowercases to two code points, as Rust's to_lowercase.
  json d = fixture("bert_wordpiece.json");
  d["normalizer"]["strip_accents"] = false;
  EXPECT_EQ(JsonTokenizer::parse(d.dump(), "t").normalize("\u0130X"), "i\u0307x");
  EXPECT_EQ(tok.decode(tok.encode("Hello , world !")), "[CLS] hello, world! [SEP]");
  EXPECT_EQ(tok.decode(tok.encode("Hello , world !"), true), "hello, world!");
}

// Values printed by the tokenizers package (0.23.3) for the committed sp_*.json files.
TEST(JsonTokenizer, SentencePieceByteFallbackAndMetaspaceMatchTokenizers) {
  using V = std::vector<int32_t>;
  const JsonTokenizer llama2 = JsonTokenizer::load(kDir + "sp_llama2.json");
  const JsonTokenizer first = JsonTokenizer::load(kDir + "sp_metaspace_first.json");
  const JsonTokenizer always = JsonTokenizer::load(kDir + "sp_metaspace_always.json");
  const int32_t sp = *llama2.token_to_id("\u2581"), a = *llama2.token_to_id("a");
  const int32_t b = *llama2.token_to_id("b"), c = *llama2.token_to_id("c");
  const int32_t f0 = *llama2.token_to_id("<0xF0>"), x9f = *llama2.token_to_id("<0x9F>");
  const int32_t x98 = *llama2.token_to_id("<0x98>"), x80 = *llama2.token_to_id("<0x80>");
  // U+1F600 is in no vocabulary: its four UTF-8 bytes. After </s>, Metaspace "first" puts no
  // "▁" before "b"; "always" and the Prepend normalizer (run on each piece) do.
  const std::string text = "\U0001F600 a</s>b  c";
  EXPECT_EQ(llama2.encode(text), (V{1, sp, f0, x9f, x98, x80, sp, a, 2, sp, b, sp, sp, c}));
  EXPECT_EQ(first.encode(text), (V{1, sp, f0, x9f, x98, x80, sp, a, 2, b, sp, sp, c}));
  EXPECT_EQ(always.encode(text), llama2.encode(text));
  // ByteFallback: a run of byte tokens that is not UTF-8 is one U+FFFD per byte.
  EXPECT_EQ(llama2.decode(V{f0, x9f, a}), "\ufffd\ufffda");
  EXPECT_EQ(llama2.decode(V{a, f0}), "a\ufffd");
  EXPECT_EQ(llama2.decode(V{1, a, 2}), "<s>a</s>");
  EXPECT_EQ(llama2.decode(llama2.encode(" lead  two"), true), " lead  two");
  EXPECT_EQ(always.decode(always.encode(" lead  two"), true), "lead  two");
  // Without byte fallback a character outside the vocabulary is <unk>; fuse_unk makes one of
  // a run.
  json d = fixture("sp_llama2.json");
  d["model"]["byte_fallback"] = false;
  const std::string unknown = "a\U0001F600\U0001F600 \u2603a";
  EXPECT_EQ(JsonTokenizer::parse(d.dump(), "t").encode(unknown), (V{1, sp, a, 0, sp, 0, a}));
  d["model"]["fuse_unk"] = false;
  EXPECT_EQ(JsonTokenizer::parse(d.dump(), "t").encode(unknown), (V{1, sp, a, 0, 0, sp, 0, a}));
}

TEST(JsonTokenizer, BertProcessingAddsWhatTheEquivalentTemplateAdds) {
  json d = fixture("bert_wordpiece.json");
  const JsonTokenizer templ = JsonTokenizer::parse(d.dump(), "template");
  d["post_processor"] = {{"type", "BertProcessing"},
                         {"sep", json::array({"[SEP]", *templ.token_to_id("[SEP]")})},
                         {"cls", json::array({"[CLS]", *templ.token_to_id("[CLS]")})}};
  const JsonTokenizer bert = JsonTokenizer::parse(d.dump(), "bert");
  const std::string text = "안녕하세요, BERT! 12345";
  EXPECT_EQ(bert.encode(text), templ.encode(text));
  EXPECT_EQ(bert.encode(text).size(), templ.encode(text, false).size() + 2);
}

// A file's truncation and padding (as sentence-transformers folders carry: all-MiniLM-L6-v2's
// values) change no id: transformers' tokenizer(text) applies neither unless asked, and snug's
// data pipeline cuts and pads itself (docs/tokenizers.md).
TEST(JsonTokenizer, TruncationAndPaddingSettingsAreReadNotApplied) {
  json d = fixture("bert_wordpiece.json");
  const JsonTokenizer plain = JsonTokenizer::parse(d.dump(), "plain");
  d["truncation"] = {{"max_length", 4}, {"strategy", "LongestFirst"}, {"stride", 0}};
  d["padding"] = {{"strategy", {{"Fixed", 128}}},
                  {"direction", "Right"},
                  {"pad_to_multiple_of", nullptr},
                  {"pad_id", 0},
                  {"pad_type_id", 0},
                  {"pad_token", "[PAD]"}};
  const JsonTokenizer set = JsonTokenizer::parse(d.dump(), "set");
  const std::string text = "안녕하세요, BERT! 12345 and a sentence longer than four tokens";
  EXPECT_GT(plain.encode(text).size(), 4U);
  EXPECT_EQ(set.encode(text), plain.encode(text));
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
  d["model"]["type"] = "Unigram";
  std::string m = refusal(d);
  EXPECT_TRUE(HasSubstr(m, "tokenizer 'bad.json'"));
  EXPECT_TRUE(HasSubstr(m, "model.type")) << m;

  d = gpt2;
  d["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
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
  d["decoder"] = {{"type", "CTC"}};
  EXPECT_TRUE(HasSubstr(refusal(d), "decoder.type"));
  d = gpt2;
  d["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_TRUE(HasSubstr(refusal(d), "post_processor.type"));
  d = gpt2;
  d["truncation"] = {{"max_length", 5}, {"shiny_new_option", 1}};
  EXPECT_TRUE(HasSubstr(refusal(d), "truncation.shiny_new_option"));
  d = gpt2;
  d["padding"] = {{"pad_id", 0}, {"pad_to_left", true}};
  EXPECT_TRUE(HasSubstr(refusal(d), "padding.pad_to_left"));
  d = gpt2;
  d["model"]["byte_fallback"] = 1;
  EXPECT_TRUE(HasSubstr(refusal(d), "model.byte_fallback: expected true or false"));
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

TEST(JsonTokenizer, RefusesBrokenWordPieceFilesByName) {
  const json bert = fixture("bert_wordpiece.json");
  json d = bert;
  d["model"]["unk_token"] = "[NOPE]";
  EXPECT_TRUE(HasSubstr(refusal(d), "model.unk_token"));
  d = bert;
  d["model"].erase("max_input_chars_per_word");
  EXPECT_TRUE(HasSubstr(refusal(d), "model.max_input_chars_per_word: missing"));
  d = bert;
  d["normalizer"]["lowercase"] = "yes";
  EXPECT_TRUE(HasSubstr(refusal(d), "normalizer.lowercase"));
  d = bert;
  d["post_processor"]["single"][0]["SpecialToken"]["id"] = "[BOS]";
  EXPECT_TRUE(HasSubstr(refusal(d), "post_processor.single[0].SpecialToken.id"));
  d = bert;
  d["post_processor"]["special_tokens"]["[CLS]"]["ids"][0] = 1 << 20;
  EXPECT_TRUE(HasSubstr(refusal(d), "post_processor.special_tokens.[CLS].ids[0]"));
  d = bert;
  d["post_processor"]["single"].erase(1);  // no $A
  EXPECT_TRUE(HasSubstr(refusal(d), "post_processor.single"));
  d = bert;
  d["decoder"]["cleanup"] = nullptr;
  EXPECT_TRUE(HasSubstr(refusal(d), "decoder.cleanup"));
}

TEST(JsonTokenizer, RefusesBrokenSentencePieceFilesByName) {
  const json llama2 = fixture("sp_llama2.json");
  const json always = fixture("sp_metaspace_always.json");
  json d = llama2;
  d["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}};
  EXPECT_TRUE(HasSubstr(refusal(d), "normalizer.normalizers[1].pattern.Regex"));
  d = llama2;
  d["decoder"]["decoders"][3]["start"] = -1;
  EXPECT_TRUE(HasSubstr(refusal(d), "decoder.decoders[3].start"));
  d = llama2;
  d["decoder"]["decoders"][2]["type"] = "CTC";
  EXPECT_TRUE(HasSubstr(refusal(d), "decoder.decoders[2].type"));
  d = always;
  d["pre_tokenizer"]["prepend_scheme"] = "sometimes";
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.prepend_scheme"));
  d = always;
  d["pre_tokenizer"]["replacement"] = "ab";
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.replacement"));
  // The legacy add_prefix_space: false is refused unless the scheme is "never" (as tokenizers);
  // true with the defaults (always, split) is the same tokenizer (tokenizers 0.23.3 reads it so).
  d = always;
  d["pre_tokenizer"]["add_prefix_space"] = false;
  EXPECT_TRUE(HasSubstr(refusal(d), "pre_tokenizer.add_prefix_space"));
  d = always;
  for (const char* part : {"pre_tokenizer", "decoder"})
    d[part] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}};
  const JsonTokenizer legacy = JsonTokenizer::parse(d.dump(), "legacy");
  const JsonTokenizer current = JsonTokenizer::parse(always.dump(), "current");
  const std::string text = "legacy  Metaspace</s>files \uc548\ub155";
  EXPECT_EQ(legacy.encode(text), current.encode(text));
  EXPECT_EQ(legacy.decode(legacy.encode(text)), current.decode(current.encode(text)));
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

}  // namespace tokenizer_json_test
}  // namespace
}  // namespace snug
