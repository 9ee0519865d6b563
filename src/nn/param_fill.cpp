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

// Where p's values are written: its slice while sliced() (ZeRO stage 3), else its value; f32,
// bf16 or f16.
const Tensor& fill_target(const Parameter& p) {
  const Tensor& t = p.sliced() ? p.shard : p.value;
  const DType d = t.dtype();
  SNUG_CHECK(d == DType::f32 || d == DType::bf16 || d == DType::f16, "fill_values: '", p.name,
             "' is ", dtype_name(d), ", expected f32, bf16 or f16");
  return t;
}

// A sliced parameter: how many of its slice's elements are values (the rest, past numel(), is
// padding).
int64_t shard_values(const Parameter& p) {
  return std::clamp<int64_t>(p.numel() - p.shard_begin, 0, p.shard.numel());
}

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
  // Sliced (ZeRO stage 3): the values are made in order and those of the rank's slice, elements
  // [first, last), kept.
  const Tensor& out = fill_target(p);
  const DType d = out.dtype();
  const int64_t n = p.numel();
  const int64_t first = p.sliced() ? std::min(p.shard_begin, n) : 0;
  const int64_t last = p.sliced() ? first + shard_values(p) : n;
  const Device& dev = out.device();
  std::vector<float> buf(static_cast<size_t>(std::min(kChunk, n)));
  std::vector<uint16_t> half(d == DType::f32 ? 0 : buf.size());
  // Every value is made (`fill` may be a stream the next parameter goes on with).
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t len = std::min(kChunk, n - c);
    fill(buf.data(), len);
    const int64_t a = std::max(c, first), b = std::min(c + len, last);  // kept: [a, b)
    if (a >= b) continue;
    // (No offset from a null pointer: on meta the destination stays null.)
    if (d == DType::f32) {
      float* dst = out.data<float>();
      dev.upload(dst ? dst + (a - first) : nullptr, buf.data() + (a - c), b - a);
    } else {
      // Rounded on the host (as the pack_half op rounds: core/dtype.h's convert), then uploaded.
      convert(buf.data(), DType::f32, half.data(), d, static_cast<size_t>(len));
      uint16_t* dst = out.data_u16();
      dev.upload(dst ? dst + (a - first) : nullptr, half.data() + (a - c), b - a);
    }
  }
}

namespace {

// Elements [first, first + n) of a parameter's values into `dst` (n elements of f32, bf16 or f16
// on any device but meta), filled as fill_values_indexed says.
void fill_range(const Tensor& dst, int64_t first, int64_t n, const IndexedFill& fill) {
  constexpr int64_t kBig = 65536;  // values per parallel chunk
  const DType d = dst.dtype();
  Device& dev = dst.device();
  const auto chunks = [n](int64_t size) { return (n + size - 1) / size; };
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
        fill(buf.data() + off, first + s + off, m);
        if (d != DType::f32)
          convert(buf.data() + off, DType::f32, half.data() + off, d, static_cast<size_t>(m));
      }
      if (d == DType::f32)
        dev.upload(dst.data<float>() + s, buf.data(), len);
      else
        dev.upload(dst.data_u16() + s, half.data(), len);
    }
    return;
  }
  if (d == DType::f32) {
    float* out = dst.data<float>();
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks(kBig); ++c)
      fill(out + c * kBig, first + c * kBig, std::min(kBig, n - c * kBig));
  } else {
    uint16_t* out = dst.data_u16();
#pragma omp parallel
    {
      std::vector<float> buf(static_cast<size_t>(std::min(kBig, n)));
#pragma omp for schedule(dynamic, 1)
      for (int64_t c = 0; c < chunks(kBig); ++c) {
        const int64_t len = std::min(kBig, n - c * kBig);
        fill(buf.data(), first + c * kBig, len);
        convert(buf.data(), DType::f32, out + c * kBig, d, static_cast<size_t>(len));
      }
    }
  }
}

}  // namespace

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
  // Sliced (ZeRO stage 3): only the rank's slice is made.
  const Tensor& dst = fill_target(p);
  const int64_t len = p.sliced() ? shard_values(p) : n;
  if (dst.raw() != nullptr && len > 0) fill_range(dst, p.sliced() ? p.shard_begin : 0, len, fill);
  init_progress_add(n);  // (meta: nothing to fill)
}

void store_slice(Parameter& p, const Tensor& whole) {
  SNUG_ASSERT(p.shard.defined() && whole.numel() == p.numel() && whole.dtype() == p.shard.dtype(),
              "store_slice: ", p.name);
  if (p.shard.is_meta() || whole.is_meta()) return;
  const auto es = static_cast<int64_t>(dtype_size(whole.dtype()));
  p.shard.device().upload(static_cast<unsigned char*>(p.shard.raw()),
                          static_cast<const unsigned char*>(whole.raw()) + p.shard_begin * es,
                          shard_values(p) * es);
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
