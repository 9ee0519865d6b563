// The tables of docs/quantization.md, recomputed: MSE, max error, SNR, codes used and bits per
// parameter of every format on 2^20 N(0,1) values, and on the same with outliers. Every row
// must read exactly as the document prints it (the document is the golden file; a change to a
// format that moves a number fails here until the table is updated). A slow test (about 3 s in
// Release): build/<dir>/tests/snug_slow_tests --gtest_filter='QuantTable*'.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/quant_format.h"
#include "nn/init.h"
#include "quant/quant_data.h"

namespace snug::quant {
namespace {
namespace quant_table_slowtest {

using testdata::kAll;
using testdata::normal;
using testdata::with_outliers;

const std::string kDoc = std::string(SNUG_TEST_DATA_DIR) + "/../../docs/quantization.md";
const std::string kHeader =
    "| format | block | MSE | max abs error | SNR dB | codes used | bits/param |";

// The body rows of each table of `path` whose header is kHeader, in order.
std::vector<std::vector<std::string>> doc_tables(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<std::vector<std::string>> tables;
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line == kHeader) {
      tables.emplace_back();
      in_table = true;
    } else if (in_table && line.rfind("|---", 0) == 0) {
      continue;
    } else if (in_table && line.rfind("| ", 0) == 0) {
      tables.back().push_back(line);
    } else {
      in_table = false;
    }
  }
  return tables;
}

struct Row {
  Format f;
  Options o;
};

// Every format once with its defaults (but int8_absmax_row), blockwise int8 and dynamic8 also in
// blocks of 64 and 4096, quantile also 4-bit and approximate, nf4 and fp4 also with DQ.
std::vector<Row> table_rows() {
  std::vector<Row> rows;
  for (Format f : kAll) {
    if (f == Format::int8_absmax_row) continue;
    rows.push_back({f, {}});
    if (f == Format::int8_blockwise || f == Format::dynamic8) {
      Options o64, o4k;
      o64.block = 64;
      o4k.block = 4096;
      rows.push_back({f, o64});
      rows.push_back({f, o4k});
    }
    if (f == Format::quantile) {
      Options q4, qa;
      q4.bits = 4;
      qa.quantile_sample = 4096;
      rows.push_back({f, q4});
      rows.push_back({f, qa});
    }
    if (f == Format::nf4 || f == Format::fp4) {
      Options d;
      d.double_quant = true;
      rows.push_back({f, d});
    }
  }
  return rows;
}

// One table row as the document prints it.
std::string row_text(const Row& r, const std::vector<float>& x) {
  const Quantized q = quantize(x, r.f, r.o);
  const QuantStats s = compute_stats(q, x.data());
  std::string name = format_name(r.f);
  if (r.f == Format::quantile) {
    name += " " + std::to_string(r.o.bits) + "-bit";
    if (r.o.quantile_sample) name += " (approx)";
  }
  if (r.o.double_quant) name += " + DQ";
  const auto n = static_cast<int64_t>(x.size());
  char buf[256];
  std::snprintf(buf, sizeof buf, "| %s | %s | %.3e | %.4f | %.2f | %.3f | %.4f |", name.c_str(),
                q.block > 0 && q.block < n ? std::to_string(q.block).c_str() : "-", s.mse,
                s.max_abs_error, s.snr_db, s.codes_used_fraction, s.bits_per_param);
  return buf;
}

TEST(QuantTable, NormalMillionAsDocumented) {
  const int64_t n = 1 << 20;
  const std::vector<std::vector<std::string>> doc = doc_tables(kDoc);
  ASSERT_EQ(doc.size(), 2u) << kDoc << ": the two tables (without and with outliers)";
  for (bool outliers : {false, true}) {
    SCOPED_TRACE(outliers ? "with outliers" : "N(0,1)");
    const auto x = outliers ? with_outliers(n, 11) : normal(n, 11);
    std::vector<std::string> got;
    for (const Row& r : table_rows()) got.push_back(row_text(r, x));
    std::printf("\n%s\n", kHeader.c_str());
    for (const std::string& line : got) std::printf("%s\n", line.c_str());
    EXPECT_EQ(got, doc[outliers ? 1 : 0]);
  }
}

}  // namespace quant_table_slowtest
}  // namespace
}  // namespace snug::quant
