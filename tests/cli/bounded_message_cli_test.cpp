// Messages that echoed megabytes (issue 29, item 6): every message quotes a bounded excerpt of
// the input, and a NUL in a shard name gets a reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace bounded_message_cli_test {

using ::testing::HasSubstr;

std::string tokenizer_fixture(const std::string& name) {
  return std::string(SNUG_TEST_DATA_DIR) + "/tokenizers/" + name;
}

// Item 6: a 10 MB jsonl line with a bad byte gave a 10 MB message (the JSON library's "last
// read"), a megabyte duplicate key was echoed whole, and a NUL in a shard name cut the path.
TEST(HostileRoundTwoCli, MessagesQuoteABoundedExcerpt) {
  TempDir tmp;
  const std::string data = tmp.path("big.jsonl");
  const std::string tok = " --tokenizer " + tokenizer_fixture("gpt2_style.json");
  write_file(data, "{\"text\": \"" + std::string(10 << 20, 'a') + "\xff\"}\n");
  CliResult r = run_snug("train --max-steps 1 --seq-len 16 --data " + data + tok, 120);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err, HasSubstr(data));
  EXPECT_LT(r.err.size(), 2000u) << r.err.substr(0, 2000);
  const std::string key(1 << 20, 'k');
  write_file(data, "{\"" + key + "\": 1, \"" + key + "\": 2}\n");
  r = run_snug("train --max-steps 1 --seq-len 16 --data " + data + tok, 120);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err,
              HasSubstr("duplicate JSON key '" + std::string(64, 'k') + "... (1048576 bytes)'"));
  EXPECT_LT(r.err.size(), 2000u) << r.err.substr(0, 2000);

  const std::string dir = tmp.path("model");
  ASSERT_EQ(run_snug("export-init -o " + dir, 60).exit_code, 0);
  write_file(
      dir + "/model.safetensors.index.json",
      R"({"metadata": {}, "weight_map": {"lm_head.weight": "model-\u0000-of-2.safetensors"}})");
  r = run_snug("train --max-steps 1 --model " + dir, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("weight_map['lm_head.weight']: the file name holds a NUL byte"));
}

// Item 6, end to end: each class of value the probe found echoed whole (a config.json value, a
// chat role, a special token, an adapter's target, a timeline's phase on stdout) gives a message
// of a few hundred bytes, not main()'s 4000-byte net, still naming the file.
TEST(HostileRoundTwoCli, EachQuotedValueIsAnExcerpt) {
  TempDir tmp;
  const std::string big(900'000, 'x');
  const std::string dir = tmp.path("model");
  ASSERT_EQ(run_snug("export-init -o " + dir, 60).exit_code, 0);
  const std::string config = slurp(dir + "/config.json");
  nlohmann::json c = nlohmann::json::parse(config);
  c["model_type"] = big;
  write_file(dir + "/config.json", c.dump());
  CliResult r = run_snug("plan --model " + dir + " --seq-len 16", 60);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err, HasSubstr(dir + "/config.json: model_type 'xxxx"));
  EXPECT_LT(r.err.size(), 400u) << r.err.substr(0, 2000);
  write_file(dir + "/config.json", config);

  const std::string tok = std::string(SNUG_TEST_DATA_DIR) + "/chat/tokenizer.json";
  const std::string data = tmp.path("chat.jsonl");
  write_file(data, nlohmann::json{{"messages", {{{"role", big}, {"content", "hi"}}}}}.dump());
  r = run_snug("train --max-steps 1 --seq-len 16 --data " + data + " --tokenizer " + tok, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err, HasSubstr(data + ":1: messages[0].role: 'xxxx"));
  EXPECT_LT(r.err.size(), 400u) << r.err.substr(0, 2000);

  const std::string tokdir = tmp.path("tok");
  std::filesystem::create_directories(tokdir);
  write_file(tokdir + "/tokenizer.json", slurp(tok));
  write_file(tokdir + "/tokenizer_config.json", nlohmann::json{{"eos_token", big}}.dump());
  write_file(data, "{\"text\": \"hi\"}\n");
  r = run_snug("train --max-steps 1 --seq-len 16 --data " + data + " --tokenizer " + tokdir, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err, HasSubstr("tokenizer_config.json: eos_token 'xxxx"));
  EXPECT_LT(r.err.size(), 400u) << r.err.substr(0, 2000);

  const std::string out = tmp.path("out");
  ASSERT_EQ(
      run_snug("train --max-steps 1 --seq-len 16 --lora-r 2 --save-steps 1 --output-dir " + out,
               120)
          .exit_code,
      0);
  const std::string adapter = tmp.path("adapter");
  r = run_snug("export --adapter --checkpoint " + out + "/checkpoint-1 -o " + adapter +
                   " --lora-r 2 --seq-len 16",
               60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json a = nlohmann::json::parse(slurp(adapter + "/adapter_config.json"));
  a["target_modules"] = {big};
  write_file(adapter + "/adapter_config.json", a.dump());
  r = run_snug("generate --adapter " + adapter + " --prompt hi --max-new-tokens 2", 60);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err, HasSubstr("adapter_config.json: target_modules 'xxxx"));
  EXPECT_LT(r.err.size(), 400u) << r.err.substr(0, 2000);

  const std::string timeline = tmp.path("t.json");
  write_file(timeline, nlohmann::json{{"format", "snug-memory-timeline"},
                                      {"peak_bytes", 4},
                                      {"peak_phase", big},
                                      {"events",
                                       {{{"seq", 0},
                                         {"action", "alloc"},
                                         {"category", "weights"},
                                         {"bytes", 4},
                                         {"step", 1},
                                         {"phase", "forward"},
                                         {"live_bytes", 4}}}}}
                           .dump());
  r = run_snug("plot-memory " + timeline + " -o " + tmp.path("t.svg"), 60);
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  EXPECT_THAT(r.out, HasSubstr("during 'xxxx"));
  EXPECT_LT(r.out.size(), 400u) << r.out.substr(0, 2000);
}

}  // namespace bounded_message_cli_test
}  // namespace
}  // namespace snug::test
