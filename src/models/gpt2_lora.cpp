// GPT2 with LoRA adapters (nn/lora.h): setup, the bypass's forward and backward, merging.
//
// Per adapted Linear with input x (N,in) and output y (N,out), s = scaling:
//   forward   h = dropout(x) (kept only when dropout > 0), u = h A^T (N,r), y += s u B^T
//   backward  dB += s dy^T u;  du = s dy B (N,r);  dA += du^T h;  dx += mask(du A) / (1 - p)
// u is an activation (N x r floats per adapter); du and du A are temporaries. The frozen base
// still passes its input gradient through (dx = dy W^T), so gradient checkpointing needs no
// "inputs require grad" hook as in PyTorch: backward always carries dx.
#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "kernels/kernels.h"
#include "models/gpt2_internal.h"

namespace snug {

namespace K = snug::kernels;

namespace {
constexpr const char* kSlotNames[4] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
}  // namespace

void GPT2::add_lora(const LoraConfig& cfg, uint64_t seed) {
  cfg.validate();
  SNUG_CHECK(lora_.empty(), "add_lora: the model has LoRA adapters already");
  const int64_t L = cfg_.n_layer, C = cfg_.n_embd, r = cfg.r;
  const int64_t dims[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};  // (in, out)
  auto module_name = [](int64_t l, int slot) {
    return "transformer.h." + std::to_string(l) + "." + kSlotNames[slot];
  };
  // Every key must adapt something (a typo must not silently train nothing).
  for (const std::string& key : cfg.target_modules) {
    bool hit = false;
    for (int64_t l = 0; l < L && !hit; ++l)
      for (int slot = 0; slot < 4 && !hit; ++slot)
        hit = lora_target_matches({key}, module_name(l, slot));
    SNUG_CHECK(hit, "--target-modules: '", key, "' matches no Linear of ", cfg_.name,
               " (GPT-2's are attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj; or all-linear)");
  }
  for (Parameter* p : params_) p->requires_grad = false;  // PEFT: the base is frozen
  lora_cfg_ = cfg;
  lora_seed_ = seed;
  lora_slot_.assign(static_cast<size_t>(L), {-1, -1, -1, -1});
  dev_->pool().set_phase("init lora");
  SplitMix64 rng(splitmix64_mix(seed ^ 0x4c6f526131ull));
  for (int64_t l = 0; l < L; ++l) {
    for (int slot = 0; slot < 4; ++slot) {
      const std::string m = module_name(l, slot);
      if (!lora_target_matches(cfg.target_modules, m)) continue;
      const int64_t in = dims[slot][0], out = dims[slot][1];
      add_param(m + ".lora_A.weight", {r, in}, true);
      Parameter* A = params_.back();
      add_param(m + ".lora_B.weight", {out, r}, true);
      Parameter* B = params_.back();
      if (!dev_->is_meta()) {
        // kaiming_uniform_(a=sqrt(5)) on (r, in): bound = gain * sqrt(3 / in), gain =
        // sqrt(2 / (1 + 5)), i.e. 1/sqrt(in).
        const double bound = 1.0 / std::sqrt(static_cast<double>(in));
        float* a = A->value.data<float>();
        for (int64_t i = 0; i < A->value.numel(); ++i)
          a[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
        B->value.zero_();
      }
      const Layer& w = layers_[static_cast<size_t>(l)];
      Parameter* base[4] = {w.qkv_w, w.attproj_w, w.fc_w, w.fcproj_w};
      lora_slot_[static_cast<size_t>(l)][static_cast<size_t>(slot)] =
          static_cast<int>(lora_.size());
      lora_.push_back({m, base[slot], A, B, l, slot, /*fan_in_fan_out=*/true});
    }
  }
}

const GPT2::LoraAdapter* GPT2::lora_at(size_t l, int slot) const {
  if (lora_.empty()) return nullptr;
  const int i = lora_slot_[l][static_cast<size_t>(slot)];
  return i < 0 ? nullptr : &lora_[static_cast<size_t>(i)];
}

void GPT2::lora_forward(const LoraAdapter& ad, const Tensor& in, const Tensor& out,
                        GPT2LayerActivations& a) {
  const int64_t IC = in.dim(-1), OC = out.dim(-1), N = in.numel() / IC, r = lora_cfg_.r;
  const bool real = !dev_->is_meta();
  const double p = lora_cfg_.dropout;
  const size_t slot = static_cast<size_t>(ad.slot);
  const Tensor* h = &in;
  if (training_forward_ && p > 0) {
    // h = x * mask / (1 - p), kept for A's gradient (the mask itself is recomputed).
    a.lora_in[slot] = Tensor::empty(in.shape(), DType::f32, Category::activations, *dev_);
    if (real)
      lora_dropout(lora_dropout_key(lora_seed_, forward_count_, ad.layer, ad.slot), p,
                   in.data<float>(), a.lora_in[slot].data<float>(), N * IC, false);
    h = &a.lora_in[slot];
  }
  Shape ush = in.shape();
  ush.back() = r;
  a.lora_u[slot] = Tensor::empty(ush, DType::f32, Category::activations, *dev_);
  if (!real) return;
  K::lora_forward(out.data<float>(), a.lora_u[slot].data<float>(), h->data<float>(),
                  ad.A->value.data<float>(), ad.B->value.data<float>(), N, IC, OC, r,
                  static_cast<float>(lora_cfg_.scaling()));
}

void GPT2::lora_backward(const LoraAdapter& ad, const Tensor& dout, const Tensor& in,
                         const Tensor& din, GPT2LayerActivations& a, float* dA, float* dB) {
  const int64_t IC = in.dim(-1), OC = dout.dim(-1), N = in.numel() / IC, r = lora_cfg_.r;
  const bool real = !dev_->is_meta();
  const size_t slot = static_cast<size_t>(ad.slot);
  const bool dropped = a.lora_in[slot].defined();
  const Tensor& h = dropped ? a.lora_in[slot] : in;
  auto tmp = [&](const Shape& sh) {
    return Tensor::empty(sh, DType::f32, Category::temporary, *dev_);
  };
  Tensor du = tmp({N, r});
  Tensor dh;
  if (dropped) dh = tmp({N, IC});
  if (real) {
    // Without dropout dh goes straight into din; with it, through the mask.
    K::lora_backward(dropped ? dh.data<float>() : din.data<float>(), dA, dB, du.data<float>(),
                     dout.data<float>(), h.data<float>(), a.lora_u[slot].data<float>(),
                     ad.A->value.data<float>(), ad.B->value.data<float>(), N, IC, OC, r,
                     static_cast<float>(lora_cfg_.scaling()), !dropped);
    if (dropped)
      lora_dropout(lora_dropout_key(lora_seed_, forward_count_, ad.layer, ad.slot),
                   lora_cfg_.dropout, dh.data<float>(), din.data<float>(), N * IC, true);
  }
  a.lora_u[slot].reset();
  a.lora_in[slot].reset();
}

std::vector<float> GPT2::merged_weight(const LoraAdapter& ad) const {
  SNUG_CHECK(!dev_->is_meta(), "merged_weight: the model is on the meta device (no values)");
  const int64_t r = lora_cfg_.r, IC = ad.A->value.dim(1), OC = ad.B->value.dim(0);
  std::vector<float> w(static_cast<size_t>(IC * OC));
  Tensor scratch;
  const float* base = gemm_weight(ad.base, scratch);
  std::copy_n(base, w.size(), w.data());
  // w(IC,OC) += s A(r,IC)^T B(OC,r)^T
  K::gemm_f32(true, true, IC, OC, r, static_cast<float>(lora_cfg_.scaling()),
              ad.A->value.data<float>(), IC, ad.B->value.data<float>(), r, 1.0f, w.data(), OC);
  return w;
}

}  // namespace snug
