#include "quant/weight_quant.h"

#include <functional>
#include <vector>

#include "core/error.h"
#include "core/host_staging.h"
#include "io/excerpt.h"
#include "kernels/op_table.h"

namespace snug {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

bool is_4bit(quant::Format f) {
  return f == quant::Format::nf4 || f == quant::Format::fp4;
}

// t's data, or nullptr for a tensor this format does not use (e.g. absmax under double quant).
template <typename T>
T* data_of(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

quant::Options options_of(const WeightQuantConfig& rc) {
  quant::Options o;
  o.block = rc.block;
  o.double_quant = rc.double_quant;
  return o;
}

// Runs f, prefixing the message of a user error with the weight's name. Only for steps that
// allocate nothing (an OutOfMemoryError must keep its type and message).
void named(const std::string& name, const std::function<void()>& f) {
  try {
    f();
  } catch (const OutOfMemoryError&) {
    throw;
  } catch (const Error& e) {
    throw Error(detail::concat("quantize_weight ", name, ": ", e.what()));
  }
}

// Writes w's codes into q's tensors through the device's op table (nothing on meta). Under double
// quantization the fp32 block absmax goes to `scratch` (num_blocks floats), or to host memory
// inside the op when it is undefined. The quantizer is host-only (kernels/op_table.h): its
// outputs are staged on the host (core/host_staging.h: the tensors themselves on cpu) and uploaded.
void fill_codes(QuantizedWeight& q, const float* w, const Tensor& scratch,
                const std::string& name) {
  using Use = HostStaging::Use;
  // codes and dq_offset start zeroed (empty_quantized_weight); the op may rely on it.
  const HostStaging codes(q.codes, Use::read_write), absmax(q.absmax, Use::write),
      dq_codes(q.dq_codes, Use::write), dq_absmax(q.dq_absmax, Use::write),
      dq_offset(q.dq_offset, Use::read_write), staged_scratch(scratch, Use::write);
  float* am = q.cfg.double_quant ? staged_scratch.data<float>() : absmax.data<float>();
  named(name, [&] {
    q.codes.device().ops().quantize_weight_codes(
        codes.data<uint8_t>(), am, dq_codes.data<uint8_t>(), dq_absmax.data<float>(),
        dq_offset.data<float>(), w, q.numel, q.cfg.format, q.cfg.block, q.cfg.double_quant);
  });
  for (const HostStaging* h : {&codes, &absmax, &dq_codes, &dq_absmax, &dq_offset}) h->upload();
}

QuantizedWeight quantize_into_tracked(const float* w, const Shape& shape,
                                      const WeightQuantConfig& cfg, Device& dev,
                                      const std::string& name) {
  named(name, [&] {
    cfg.resolved();
    SNUG_CHECK(shape_numel(shape) > 0, "empty weight ", shape_str(shape), " (nothing to quantize)");
  });
  QuantizedWeight q = empty_quantized_weight(shape, cfg, dev);
  // Values are needed wherever the codes have bytes to hold them (not on meta).
  named(name, [&] {
    SNUG_CHECK(w != nullptr || q.codes.raw() == nullptr, "no data for a weight of shape ",
               shape_str(shape), " on ", dev.name());
  });
  // Under double quantization the fp32 absmax is only the input of the second quantization: a
  // temporary, dropped on return.
  Tensor scratch;
  if (q.cfg.double_quant)
    scratch = Tensor::empty({q.num_blocks()}, DType::f32, Category::temporary, dev);
  fill_codes(q, w, scratch, name);
  return q;
}

}  // namespace

WeightQuantConfig WeightQuantConfig::resolved() const {
  SNUG_CHECK(is_4bit(format) || format == quant::Format::int8_blockwise,
             "weight quantization supports nf4, fp4 and int8_blockwise, not ",
             quant::format_name(format));
  SNUG_CHECK(!double_quant || is_4bit(format),
             "double quantization applies to the 4-bit formats (nf4, fp4), not ",
             quant::format_name(format));
  SNUG_CHECK(block >= 0,
             "weight quantization block must be positive (0 = ", quant::format_name(format),
             "'s default), got ", block);
  WeightQuantConfig r = *this;
  if (r.block == 0) r.block = quant::default_block(format);
  return r;
}

std::string WeightQuantConfig::describe() const {
  const WeightQuantConfig r = resolved();
  return detail::concat(quant::format_name(r.format), ", blocks of ", r.block,
                        r.double_quant ? ", double quant" : "");
}

int64_t QuantizedWeight::num_blocks() const {
  return cfg.block > 0 ? ceil_div(numel, cfg.block) : 0;
}

int64_t QuantizedWeight::tracked_bytes() const {
  int64_t b = 0;
  for (const Tensor* t : {&codes, &absmax, &dq_codes, &dq_absmax, &dq_offset})
    if (t->defined()) b += t->nbytes();
  return b;
}

QuantizedWeight quantize_weight(const Tensor& w, const WeightQuantConfig& cfg,
                                const std::string& name) {
  named(name, [&] {
    SNUG_CHECK(w.defined(), "undefined tensor");
    SNUG_CHECK(w.dtype() == DType::f32, "expected an f32 tensor, got ", dtype_name(w.dtype()),
               " of shape ", shape_str(w.shape()));
  });
  const HostStaging hw(w, HostStaging::Use::read);  // the host-only quantizer's input
  return quantize_into_tracked(hw.data<float>(), w.shape(), cfg, w.device(), name);
}

QuantizedWeight quantize_weight(const float* w, const Shape& shape, const WeightQuantConfig& cfg,
                                Device& dev, const std::string& name) {
  return quantize_into_tracked(w, shape, cfg, dev, name);
}

QuantizedWeight empty_quantized_weight(const Shape& shape, const WeightQuantConfig& cfg,
                                       Device& dev) {
  QuantizedWeight q;
  q.cfg = cfg.resolved();
  q.shape = shape;
  q.numel = shape_numel(shape);
  SNUG_CHECK(q.numel > 0, "empty weight ", shape_str(shape), " (nothing to quantize)");
  const int64_t nb = q.num_blocks();
  q.codes =
      Tensor::zeros({weight_quant_bytes(q.numel, q.cfg).codes}, DType::u8, Category::weights, dev);
  if (q.cfg.double_quant) {
    q.dq_codes = Tensor::empty({nb}, DType::u8, Category::quant_state, dev);
    q.dq_absmax = Tensor::empty({ceil_div(nb, quant::kDoubleQuantBlock)}, DType::f32,
                                Category::quant_state, dev);
    q.dq_offset = Tensor::zeros({1}, DType::f32, Category::quant_state, dev);
  } else {
    q.absmax = Tensor::empty({nb}, DType::f32, Category::quant_state, dev);
  }
  return q;
}

void quantize_weight_into(QuantizedWeight& q, const float* w, const std::string& name) {
  fill_codes(q, w, Tensor(), name);  // double quantization's fp32 absmax staged in host memory
}

void dequantize_weight(const QuantizedWeight& q, float* out) {
  q.codes.device().ops().dequantize_weight_codes(
      out, q.codes.data<uint8_t>(), data_of<float>(q.absmax), data_of<uint8_t>(q.dq_codes),
      data_of<float>(q.dq_absmax), data_of<float>(q.dq_offset), q.numel, q.cfg.format, q.cfg.block,
      q.cfg.double_quant);
}

quant::Quantized to_quantized(const QuantizedWeight& q) {
  SNUG_CHECK(q.codes.raw() != nullptr, "to_quantized: a meta weight has no values");
  quant::Quantized r;
  r.format = q.cfg.format;
  r.shape = q.shape;
  r.numel = q.numel;
  r.block = q.cfg.block;
  r.bits = quant::bits_per_code(q.cfg.format);
  const auto copy_u8 = [](const Tensor& t) {
    const HostStaging h(t, HostStaging::Use::read);
    const uint8_t* p = h.data<uint8_t>();
    return std::vector<uint8_t>(p, p + t.numel());
  };
  const auto copy_f32 = [](const Tensor& t) {
    const HostStaging h(t, HostStaging::Use::read);
    const float* p = h.data<float>();
    return std::vector<float>(p, p + t.numel());
  };
  r.codes = copy_u8(q.codes);
  if (q.cfg.double_quant) {
    r.double_quant = true;
    r.dq_codes = copy_u8(q.dq_codes);
    r.dq_absmax = copy_f32(q.dq_absmax);
    r.dq_offset = copy_f32(q.dq_offset)[0];
  } else {
    r.scales = copy_f32(q.absmax);
  }
  return r;
}

void dequantize_weight_reference(const QuantizedWeight& q, float* out) {
  quant::dequantize(to_quantized(q), out);
}

quant::StorageBytes weight_quant_bytes(int64_t numel, const WeightQuantConfig& cfg) {
  const WeightQuantConfig rc = cfg.resolved();
  return quant::storage_breakdown(rc.format, numel, options_of(rc));
}

quant::Format parse_4bit_quant_type(const std::string& s) {
  if (s == "nf4") return quant::Format::nf4;
  if (s == "fp4") return quant::Format::fp4;
  throw Error(detail::concat("--bnb-4bit-quant-type must be nf4 or fp4, got '", excerpt(s), "'"));
}

}  // namespace snug
