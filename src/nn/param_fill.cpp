#include "nn/param_fill.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/host_staging.h"
#include "nn/init_progress.h"
#include "quant/weight_quant.h"

namespace snug::nn {

namespace {
constexpr int64_t kChunk = 4096;  // floats per host-buffer chunk (16 KiB)
}  // namespace

void fill_values(Parameter& p, const OpTable& /*ops: the device's, whose copies it uses*/,
                 const std::function<void(float*, int64_t)>& fill) {
  if (p.quantized()) {
    // Not zeroed first: fill writes every value (a pass over the tensor saved).
    const auto host = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(p.numel()));
    fill(host.get(), p.numel());
    quantize_weight_into(*p.quant, host.get(), p.name);
    return;
  }
  const DType d = p.value.dtype();
  SNUG_CHECK(d == DType::f32 || d == DType::bf16 || d == DType::f16, "fill_values: '", p.name,
             "' is ", dtype_name(d), ", expected f32, bf16 or f16");
  const int64_t n = p.value.numel();
  const Device& dev = p.value.device();
  std::vector<float> buf(static_cast<size_t>(std::min(kChunk, n)));
  std::vector<uint16_t> half(d == DType::f32 ? 0 : buf.size());
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t len = std::min(kChunk, n - c);
    fill(buf.data(), len);
    // (No offset from a null pointer: on meta the destination stays null.)
    if (d == DType::f32) {
      float* dst = p.value.data<float>();
      dev.upload(dst ? dst + c : nullptr, buf.data(), len);
    } else {
      // Rounded on the host (as the pack_half op rounds: core/dtype.h's convert), then uploaded.
      convert(buf.data(), DType::f32, half.data(), d, static_cast<size_t>(len));
      uint16_t* dst = p.value.data_u16();
      dev.upload(dst ? dst + c : nullptr, half.data(), len);
    }
  }
}

void fill_values_indexed(Parameter& p, const IndexedFill& fill) {
  constexpr int64_t kBig = 65536;  // values per parallel chunk
  const int64_t n = p.numel();
  const auto chunks = [n](int64_t size) { return (n + size - 1) / size; };
  if (p.quantized()) {
    // Not zeroed first: the chunks write every value (and touch its pages in parallel).
    const auto host = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(n));
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks(kBig); ++c)
      fill(host.get() + c * kBig, c * kBig, std::min(kBig, n - c * kBig));
    quantize_weight_into(*p.quant, host.get(), p.name);
    init_progress_add(n);
    return;
  }
  const DType d = p.value.dtype();
  SNUG_CHECK(d == DType::f32 || d == DType::bf16 || d == DType::f16, "fill_values: '", p.name,
             "' is ", dtype_name(d), ", expected f32, bf16 or f16");
  Device& dev = p.value.device();
  if (p.value.raw() == nullptr) {  // meta: nothing to fill
    init_progress_add(n);
    return;
  }
  if (!dev.host_addressable()) {
    // A GPU: slabs of kSlab values filled (and rounded) on the host in parallel, then uploaded,
    // so a 7B model's start-up is the cores' fill rate, not one thread's and a copy per 16 KiB.
    constexpr int64_t kSlab = 64 * kBig;  // 4 Mi values: 16 MiB of fp32 on the host
    const int64_t slab = std::min(kSlab, n);
    std::vector<float> buf(static_cast<size_t>(slab));
    std::vector<uint16_t> half(d == DType::f32 ? 0 : buf.size());
    for (int64_t s = 0; s < n; s += kSlab) {
      const int64_t len = std::min(kSlab, n - s);
      const int64_t pieces = (len + kBig - 1) / kBig;
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t c = 0; c < pieces; ++c) {
        const int64_t off = c * kBig;
        const int64_t m = std::min(kBig, len - off);
        fill(buf.data() + off, s + off, m);
        if (d != DType::f32)
          convert(buf.data() + off, DType::f32, half.data() + off, d, static_cast<size_t>(m));
      }
      if (d == DType::f32)
        dev.upload(p.value.data<float>() + s, buf.data(), len);
      else
        dev.upload(p.value.data_u16() + s, half.data(), len);
    }
    init_progress_add(n);
    return;
  }
  if (d == DType::f32) {
    float* dst = p.value.data<float>();
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks(kBig); ++c)
      fill(dst + c * kBig, c * kBig, std::min(kBig, n - c * kBig));
  } else {
    uint16_t* dst = p.value.data_u16();
#pragma omp parallel
    {
      std::vector<float> buf(static_cast<size_t>(std::min(kBig, n)));
#pragma omp for schedule(dynamic, 1)
      for (int64_t c = 0; c < chunks(kBig); ++c) {
        const int64_t len = std::min(kBig, n - c * kBig);
        fill(buf.data(), c * kBig, len);
        convert(buf.data(), DType::f32, dst + c * kBig, d, static_cast<size_t>(len));
      }
    }
  }
  init_progress_add(n);
}

void read_values(const Parameter& p, float* out) {
  const int64_t n = p.numel();
  if (p.quantized()) {
    Device& dev = p.quant->codes.device();
    if (dev.host_addressable()) {
      dequantize_weight(*p.quant, out);
      return;
    }
    const Tensor t = Tensor::empty(p.quant->shape, DType::f32, Category::temporary, dev);
    dequantize_weight(*p.quant, t.data<float>());
    dev.download(out, t.data<float>(), n);
    return;
  }
  const Tensor& v = p.value;
  Device& dev = v.device();
  if (v.dtype() == DType::f32) {
    dev.download(out, v.data<float>(), n);
  } else if (dev.host_addressable()) {
    dev.ops().unpack_half(out, v.data_u16(), n, v.dtype() == DType::f16);
  } else {
    const HostStaging h(v, HostStaging::Use::read);
    convert(h.raw(), v.dtype(), out, DType::f32, static_cast<size_t>(n));
  }
}

}  // namespace snug::nn
