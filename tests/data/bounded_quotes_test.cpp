// jsonl records, tokenizer_config.json and tokenizer.json are untrusted (issue 29, item 6): a
// megabyte role, special token, field name or value is quoted as a short excerpt in every
// refusal, which still names the file and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/sft_data.h"
#include "data/tokenizer_json.h"
#include "support/bounded_quote.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace data_bounded_quotes_test {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTokenizer = std::string(SNUG_TEST_DATA_DIR) + "/chat/tokenizer.json";

TEST(BoundedQuotes, ChatRolesOfJsonlRecords) {
  const std::string big = megabyte();
  const std::string line = json{{"messages", {{{"role", big}, {"content", "hi"}}}}}.dump();
  EXPECT_TRUE(refuses_bounded([&] { (void)parse_sft_record(line, "d.jsonl:7"); },
                              {"d.jsonl:7", "messages[0].role: 'xxxx", "(1048576 bytes)"}));
  const std::string pc = json{{"prompt", {{{"role", "user"}, {"content", "a"}}}},
                              {"completion", {{{"role", big}, {"content", "b"}}}}}
                             .dump();
  EXPECT_TRUE(refuses_bounded([&] { (void)parse_sft_record(pc, "d.jsonl:8"); },
                              {"d.jsonl:8", "completion[0].role: 'xxxx"}));
}

TEST(BoundedQuotes, SpecialTokensOfTokenizerConfig) {
  TempDir tmp;
  const std::string big = megabyte();
  auto folder = [&](const std::string& name, const json& config) {
    const fs::path dir = tmp.path(name);
    fs::create_directories(dir);
    fs::copy_file(kTokenizer, dir / "tokenizer.json");
    std::ofstream(dir / "tokenizer_config.json") << config.dump();
    return dir.string();
  };
  for (const char* key : {"eos_token", "bos_token", "pad_token"}) {
    const std::string dir = folder(key, {{key, big}});
    EXPECT_TRUE(refuses_bounded([&] { (void)ModelTokenizer::load(dir); },
                                {"tokenizer_config.json", key, "'xxxx", "not in the vocabulary"}));
  }
  const std::string dir = folder("object", {{"eos_token", {{"content", big}}}});
  EXPECT_TRUE(refuses_bounded([&] { (void)ModelTokenizer::load(dir); },
                              {"tokenizer_config.json", "eos_token", "'xxxx"}));
}

TEST(BoundedQuotes, FieldsOfTokenizerJson) {
  const std::string big = megabyte();
  json base;
  std::ifstream(kTokenizer) >> base;
  auto refuses = [&](const json& j, std::initializer_list<std::string_view> parts) {
    return refuses_bounded([text = j.dump()] { (void)JsonTokenizer::parse(text, "tok.json"); },
                           parts);
  };
  json j = base;
  j[big] = 1;
  EXPECT_TRUE(refuses(j, {"tok.json", "xxxx", "field not supported"}));
  j = base;
  j["model"][big] = 1;
  EXPECT_TRUE(refuses(j, {"tok.json", "model.xxxx", "field not supported"}));
  j = base;
  j["model"]["vocab"]["zzz"] = big;
  EXPECT_TRUE(refuses(j, {"tok.json", "model.vocab['zzz']: id \"xxxx"}));
}

}  // namespace data_bounded_quotes_test
}  // namespace
}  // namespace snug::test
