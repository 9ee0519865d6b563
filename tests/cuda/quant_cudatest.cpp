// The CUDA dequantizer (kernels/cuda/quant.cu) against snug::ref: codes made by the host-only
// quantizer on random weights, dequantized on the GPU bit for bit as on the host, for every
// format of the op (nf4, fp4, int8_blockwise; the 4-bit ones with and without double
// quantization), even and odd block lengths.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/quant_format.h"
#include "kernels/quant_ops.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace quant_cudatest {

using test::GpuBuffer;
using test::random_floats;

TEST(CudaQuant, DequantizeWeightCodesSameBits) {
  SNUG_REQUIRE_GPU(gpu);
  uint64_t seed = 50;
  for (quant::Format f : {quant::Format::nf4, quant::Format::fp4, quant::Format::int8_blockwise})
    for (bool dq : {false, true}) {
      if (dq && f == quant::Format::int8_blockwise) continue;
      for (int64_t block : {64, 63, 4096})
        for (int64_t n : {1, 7, 1000, 300001, 768 * 3072}) {
          SCOPED_TRACE(testing::Message() << quant::format_name(f) << " dq=" << dq
                                          << " block=" << block << " n=" << n);
          const auto w = random_floats(n, ++seed, -2.0f, 2.0f);
          const int64_t nb = (n + block - 1) / block;
          const int64_t groups = (nb + quant::kDoubleQuantBlock - 1) / quant::kDoubleQuantBlock;
          const quant::StorageBytes sb =
              quant::storage_breakdown(f, n, quant::Options{.block = block, .double_quant = dq});
          std::vector<uint8_t> codes(static_cast<size_t>(sb.codes)), dq_codes(nb);
          std::vector<float> absmax(nb), dq_absmax(groups), offset(1, 0.0f);
          ref::quantize_weight_codes(codes.data(), absmax.data(), dq_codes.data(), dq_absmax.data(),
                                     offset.data(), w.data(), n, f, block, dq);
          std::vector<float> want(n);
          ref::dequantize_weight_codes(want.data(), codes.data(), absmax.data(), dq_codes.data(),
                                       dq_absmax.data(), offset.data(), n, f, block, dq);

          GpuBuffer<uint8_t> dcodes(gpu, codes), ddq_codes(gpu, dq_codes);
          GpuBuffer<float> dabsmax(gpu, absmax), ddq_absmax(gpu, dq_absmax), doffset(gpu, offset);
          GpuBuffer<float> out(gpu, n);  // poisoned
          // The tensors a format does not read are passed as null.
          gpu.ops().dequantize_weight_codes(
              out, dcodes, dq ? nullptr : dabsmax.get(), dq ? ddq_codes.get() : nullptr,
              dq ? ddq_absmax.get() : nullptr, dq ? doffset.get() : nullptr, n, f, block, dq);
          EXPECT_EQ(out.host(), want);
        }
    }
}

}  // namespace quant_cudatest
}  // namespace
}  // namespace snug
