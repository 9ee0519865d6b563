// Prints the table of docs/quantization.md: MSE, max error, SNR, codes used and bits per
// parameter of every format on 2^20 N(0,1) values, and on the same with outliers. A slow test
// (about 3 s in Release): build/<dir>/tests/snug_slow_tests --gtest_filter='QuantTable*'.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "nn/init.h"
#include "core/quant_format.h"
#include "quant/quant_data.h"

namespace snug::quant {
namespace {

using testdata::kAll;
using testdata::normal;
using testdata::with_outliers;

// The table in docs/quantization.md: N(0,1), 1M values (and the same with outliers).
TEST(QuantTable, NormalMillion) {
  const int64_t n = 1 << 20;
  for (bool outliers : {false, true}) {
    const auto x = outliers ? with_outliers(n, 11) : normal(n, 11);
    std::printf("\n%s, %lld values\n",
                outliers ? "N(0,1) with outliers (x40 every 997th)" : "N(0,1)",
                static_cast<long long>(n));
    std::printf("| format | block | MSE | max abs error | SNR dB | codes used | bits/param |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    struct Row {
      Format f;
      Options o;
    };
    std::vector<Row> rows;
    for (Format f : kAll) {
      Options o;
      if (f == Format::int8_absmax_row) continue;
      rows.push_back({f, o});
      if (f == Format::int8_blockwise || f == Format::dynamic8) {
        Options o64;
        o64.block = 64;
        Options o4k;
        o4k.block = 4096;
        rows.push_back({f, o64});
        rows.push_back({f, o4k});
      }
      if (f == Format::quantile) {
        Options q4;
        q4.bits = 4;
        rows.push_back({f, q4});
        Options qa;
        qa.quantile_sample = 4096;
        rows.push_back({f, qa});
      }
      if (f == Format::nf4 || f == Format::fp4) {
        Options d;
        d.double_quant = true;
        rows.push_back({f, d});
      }
    }
    for (const Row& r : rows) {
      const Quantized q = quantize(x, r.f, r.o);
      const QuantStats s = compute_stats(q, x.data());
      std::string name = format_name(r.f);
      if (r.f == Format::quantile) {
        name += " " + std::to_string(r.o.bits) + "-bit";
        if (r.o.quantile_sample) name += " (approx)";
      }
      if (r.o.double_quant) name += " + DQ";
      std::printf("| %s | %s | %.3e | %.4f | %.2f | %.3f | %.4f |\n", name.c_str(),
                  q.block > 0 && q.block < n ? std::to_string(q.block).c_str() : "-", s.mse,
                  s.max_abs_error, s.snr_db, s.codes_used_fraction, s.bits_per_param);
    }
  }
}

}  // namespace
}  // namespace snug::quant
