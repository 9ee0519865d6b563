// A safetensors header is untrusted (issue 29, item 6): a megabyte tensor name, dtype or
// __metadata__ key is quoted as a short excerpt in every refusal, which still names the file and
// what is wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "io/safetensors.h"
#include "support/bounded_quote.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace io_bounded_quotes_test {

// A safetensors file of `header` and `data_bytes` zero bytes of data.
std::string write_st(const TempDir& tmp, const std::string& name, const nlohmann::json& header,
                     size_t data_bytes) {
  const std::string path = tmp.path(name);
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h << std::string(data_bytes, '\0');
  return path;
}

nlohmann::json entry(const std::string& dtype, int64_t begin, int64_t end) {
  return {{"dtype", dtype}, {"shape", {(end - begin) / 4}}, {"data_offsets", {begin, end}}};
}

TEST(BoundedQuotes, SafetensorsHeaderNamesAndValues) {
  TempDir tmp;
  const std::string big = megabyte();
  auto open = [](const std::string& p) { return [p] { SafetensorsFile f(p); }; };

  std::string p = write_st(tmp, "name_dtype.safetensors", {{big, entry("Q9", 0, 4)}}, 4);
  EXPECT_TRUE(refuses_bounded(open(p), {p, "tensor 'xxxx", "(1048576 bytes)", "unknown dtype"}));

  p = write_st(tmp, "dtype.safetensors", {{"a", entry(big, 0, 4)}}, 4);
  EXPECT_TRUE(refuses_bounded(open(p), {p, "tensor 'a'", "unknown dtype 'xxxx"}));

  p = write_st(tmp, "metadata.safetensors",
               {{"a", entry("F32", 0, 4)}, {"__metadata__", {{big, 1}}}}, 4);
  EXPECT_TRUE(refuses_bounded(open(p), {p, "__metadata__ value of 'xxxx", "is not a string"}));

  p = write_st(tmp, "overlap.safetensors",
               {{big, entry("F32", 0, 4)}, {"b" + big, entry("F32", 0, 4)}}, 4);
  EXPECT_TRUE(refuses_bounded(open(p), {p, "overlap"}));

  p = write_st(tmp, "gap.safetensors", {{big, entry("F32", 4, 8)}}, 8);
  EXPECT_TRUE(refuses_bounded(open(p), {p, "unindexed bytes", "before tensor 'xxxx"}));

  // A shape of 500000 dimensions whose bytes do not add up: its first dimensions and the count.
  nlohmann::json wide = entry("F32", 0, 4);
  wide["shape"] = nlohmann::json(500000, 1);
  wide["shape"][0] = 2;
  p = write_st(tmp, "wide.safetensors", {{"a", wide}}, 4);
  EXPECT_TRUE(refuses_bounded(open(p), {p, "tensor 'a'", "(2,1,1,", "(500000 dimensions)"}));

  // A name a caller asks for (from another file: an index, a checkpoint's record).
  p = write_st(tmp, "ok.safetensors", {{big, entry("I32", 0, 4)}}, 4);
  const SafetensorsFile f(p);
  EXPECT_TRUE(refuses_bounded([&] { (void)f.info("y" + big); }, {p, "no tensor named 'yxxx"}));
  EXPECT_TRUE(refuses_bounded([&] { (void)f.read_f32(big); }, {p, "not a float dtype"}));
}

}  // namespace io_bounded_quotes_test
}  // namespace
}  // namespace snug::test
