// Box-Muller on SIMD lanes with a guard that keeps every float the definition's (the proof is in
// nn/normal_simd.h). GCC's vector extensions carry the arithmetic, so one text serves 8 lanes
// (AVX-512) and 4 (AVX2); sqrt and fused multiply-add are the ISA's intrinsics.
#include "nn/normal_simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "core/random.h"
#include "nn/init.h"

#if SNUG_NORMAL_LANES > 0
#include <immintrin.h>
#endif

// GCC 12's AVX-512 intrinsics pass an "undefined" vector through, which it then reports as
// (maybe-)uninitialized where they inline (GCC bug 105593, as core/dtype.cpp); the warning is
// false.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace snug::detail {

namespace {

// The definition, for the pairs the lanes leave (a tail shorter than the lanes, a guarded lane).
void scalar_pair(double u1, double u2, float* out, float mean, float std) {
  double c, s;
  box_muller(u1, u2, &c, &s);
  out[0] = mean + std * static_cast<float>(c);
  out[1] = mean + std * static_cast<float>(s);
}

#if SNUG_NORMAL_LANES > 0

constexpr int W = SNUG_NORMAL_LANES;
typedef double VD __attribute__((vector_size(8 * W)));
typedef uint64_t VU __attribute__((vector_size(8 * W)));
typedef int64_t VI __attribute__((vector_size(8 * W)));
typedef float VF __attribute__((vector_size(4 * W)));
typedef int32_t VI32 __attribute__((vector_size(4 * W)));

inline VD splat(double v) {
  return VD{} + v;
}

#if SNUG_NORMAL_LANES == 8
inline VD vsqrt(VD x) {
  return (VD)_mm512_sqrt_pd((__m512d)x);
}
inline VD vfma(VD a, VD b, VD c) {
  return (VD)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
}
#else
inline VD vsqrt(VD x) {
  return (VD)_mm256_sqrt_pd((__m256d)x);
}
inline VD vfma(VD a, VD b, VD c) {
  return (VD)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
}
#endif

constexpr uint64_t kMantissa = 0x000fffffffffffffull;
constexpr uint64_t kTwo52Bits = 0x4330000000000000ull;  // 2^52: its mantissa holds an integer

// SplitMix64::uniform of mixed words z: (double(z >> 11) + 1.0) * 2^-53, every step exact. The
// 53-bit integer is converted as its low 52 bits in 2^52's mantissa plus 2^52 where bit 52 is set.
inline VD uniform_lanes(VU z) {
  const VU v = z >> 11;
  const VD low = (VD)((v & kMantissa) | kTwo52Bits) - 0x1p52;
  const VD high = (VD)((VU{} - (v >> 52)) & kTwo52Bits);  // 2^52 or +0
  return ((low + high) + 1.0) * 0x1p-53;
}

// log(u) for u in (0, 1]: u = 2^e m with m in (sqrt(1/2), sqrt(2)], f = m - 1 (exact),
// log(1 + f) = 2 atanh(s) = 2s + 2s z (1/3 + z/5 + ... + z^10/23), s = f / (2 + f), z = s^2 <=
// 0.0295 (the next term is below 10^-18 of the sum), and e ln 2 with ln 2 in two parts (e times
// the 40-bit high part is exact). About 1.5 ulp, relative, near u = 1 too (f is exact).
inline VD log_lanes(VD u) {
  const VU b = (VU)u;
  VD e = (VD)((b >> 52) | kTwo52Bits) - (0x1p52 + 1023.0);
  VD m = (VD)((b & kMantissa) | 0x3ff0000000000000ull);
  const VI big = m > splat(std::numbers::sqrt2);
  m = big ? m * 0.5 : m;
  e = big ? e + 1.0 : e;
  const VD f = m - 1.0;
  const VD s = f / (f + 2.0);
  const VD z = s * s;
  VD p = splat(1.0 / 23.0);
  for (int k = 21; k >= 3; k -= 2) p = vfma(p, z, splat(1.0 / k));
  const VD t = s * 2.0;
  const VD log1p_f = vfma(t * z, p, t);
  constexpr double kLn2Hi = 0x1.62e42fefa4000p-1, kLn2Lo = -0x1.8432a1b0e2634p-43;
  return vfma(e, splat(kLn2Hi), vfma(e, splat(kLn2Lo), log1p_f));
}

// sin and cos of th in [0, 2 pi + 1]: q = round(th * 2 / pi), y = th - q pi/2 with pi/2 in three
// parts (33, 33 and 53 bits: q p1 and q p2 are exact for q <= 7 and th - q p1 is exact by
// Sterbenz's lemma), so |y - the true remainder| <= 2^-53; then the Taylor series of sin y through
// y^17 and of cos y through y^16 (|y| <= pi/4: the next terms are below 10^-17), and the quadrant.
// Within about 1.5 * 2^-53 absolute.
inline void sincos_lanes(VD th, VD* sin_th, VD* cos_th) {
  constexpr double kP1 = 0x1.921fb54400000p+0, kP2 = 0x1.0b4611a600000p-34,
                   kP3 = 0x1.3198a2e037073p-69;
  constexpr double kRound = 0x1.8p52;  // adding it rounds to an integer in the low mantissa bits
  const VD shifted = th * (2.0 / std::numbers::pi) + kRound;
  const VU qi = (VU)shifted;
  const VD q = shifted - kRound;
  VD y = th - q * kP1;
  y = vfma(-q, splat(kP2), y);
  y = vfma(-q, splat(kP3), y);
  const VD z = y * y;
  // sin y = y + y z S(z), S = -1/3! + z/5! - ... + z^7/17!; factorials through 17! are exact.
  constexpr double kSin[] = {
      -1.0 / 6.0,        1.0 / 120.0,        -1.0 / 5040.0,          1.0 / 362880.0,
      -1.0 / 39916800.0, 1.0 / 6227020800.0, -1.0 / 1307674368000.0, 1.0 / 355687428096000.0};
  // cos y = 1 - z/2 + z^2 C(z), C = 1/4! - z/6! + ... + z^6/16!.
  constexpr double kCos[] = {
      1.0 / 24.0,        -1.0 / 720.0,         1.0 / 40320.0,         -1.0 / 3628800.0,
      1.0 / 479001600.0, -1.0 / 87178291200.0, 1.0 / 20922789888000.0};
  VD ps = splat(kSin[7]);
  for (int k = 6; k >= 0; --k) ps = vfma(ps, z, splat(kSin[k]));
  VD pc = splat(kCos[6]);
  for (int k = 5; k >= 0; --k) pc = vfma(pc, z, splat(kCos[k]));
  const VD sin_y = vfma(y * z, ps, y);
  const VD cos_y = vfma(z * z, pc, vfma(z, splat(-0.5), splat(1.0)));
  // Quadrant q mod 4: sin th = sin y, cos y, -sin y, -cos y; cos th = cos y, -sin y, -cos y, sin y.
  const VI swap = (VI)((qi & 1) != 0);
  const VD s = swap ? cos_y : sin_y, c = swap ? sin_y : cos_y;
  *sin_th = (VD)((VU)s ^ ((qi & 2) << 62));
  *cos_th = (VD)((VU)c ^ (((qi + 1) & 2) << 62));
}

// The pairs of W lanes of uniforms into out[0, 2W); a lane whose floats the guard cannot vouch
// for goes through the definition. Returns how many did.
inline int64_t pairs_lanes(VD u1, VD u2, float* out, float mean, float std) {
  const VD r = vsqrt(-2.0 * log_lanes(u1));
  const VD th = (2.0 * std::numbers::pi) * u2;
  VD s, c;
  sincos_lanes(th, &s, &c);
  const VD x = r * c, y = r * s;
  const VD bound = r * 0x1p-44 + 0x1p-1000;
  const VF xf = __builtin_convertvector(x, VF), yf = __builtin_convertvector(y, VF);
  const VI32 bad = ((VI32) __builtin_convertvector(x - bound, VF) !=
                    (VI32) __builtin_convertvector(x + bound, VF)) |
                   ((VI32) __builtin_convertvector(y - bound, VF) !=
                    (VI32) __builtin_convertvector(y + bound, VF));
  const VF ox = mean + std * xf, oy = mean + std * yf;
  // The output order x0 y0 x1 y1 ...
#if SNUG_NORMAL_LANES == 8
  const VF lo = __builtin_shufflevector(ox, oy, 0, 8, 1, 9, 2, 10, 3, 11),
           hi = __builtin_shufflevector(ox, oy, 4, 12, 5, 13, 6, 14, 7, 15);
#else
  const VF lo = __builtin_shufflevector(ox, oy, 0, 4, 1, 5),
           hi = __builtin_shufflevector(ox, oy, 2, 6, 3, 7);
#endif
  std::memcpy(out, &lo, sizeof(lo));
  std::memcpy(out + W, &hi, sizeof(hi));
  uint64_t words[sizeof(bad) / 8], any = 0;  // one test for the common case: no lane guarded
  std::memcpy(words, &bad, sizeof(bad));
  for (uint64_t w : words) any |= w;
  if (any == 0) return 0;
  int64_t fallbacks = 0;
  for (int j = 0; j < W; ++j)
    if (bad[j]) {
      scalar_pair(u1[j], u2[j], out + 2 * j, mean, std);
      ++fallbacks;
    }
  return fallbacks;
}

VD load(const double* p) {
  VD v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

#endif  // SNUG_NORMAL_LANES > 0

}  // namespace

int64_t fill_normal_pairs(uint64_t state, int64_t pairs, float* out, float mean, float std) {
  constexpr uint64_t g = SplitMix64::kGamma;
  int64_t p = 0, fallbacks = 0;
#if SNUG_NORMAL_LANES > 0
  VU draw1, draw2;  // lane j's pair takes draws 2j + 1 and 2j + 2
  for (int j = 0; j < W; ++j) {
    draw1[j] = (2 * static_cast<uint64_t>(j) + 1) * g;
    draw2[j] = (2 * static_cast<uint64_t>(j) + 2) * g;
  }
  for (; p + W <= pairs; p += W) {
    const uint64_t s = state + 2 * static_cast<uint64_t>(p) * g;
    const VD u1 = uniform_lanes(splitmix64_mix_words(s + draw1));
    const VD u2 = uniform_lanes(splitmix64_mix_words(s + draw2));
    fallbacks += pairs_lanes(u1, u2, out + 2 * p, mean, std);
  }
#endif
  SplitMix64 rng(state + 2 * static_cast<uint64_t>(p) * g);
  for (; p < pairs; ++p) {
    const double u1 = rng.uniform(), u2 = rng.uniform();
    scalar_pair(u1, u2, out + 2 * p, mean, std);
  }
  return fallbacks;
}

int64_t normal_pairs_from_uniforms(const double* u1, const double* u2, int64_t pairs, float* out,
                                   float mean, float std) {
  int64_t p = 0, fallbacks = 0;
#if SNUG_NORMAL_LANES > 0
  for (; p + W <= pairs; p += W)
    fallbacks += pairs_lanes(load(u1 + p), load(u2 + p), out + 2 * p, mean, std);
#endif
  for (; p < pairs; ++p) scalar_pair(u1[p], u2[p], out + 2 * p, mean, std);
  return fallbacks;
}

void fast_log(const double* u, double* out, int64_t n) {
#if SNUG_NORMAL_LANES > 0
  for (int64_t i = 0; i < n; i += W) {
    double in[W], res[W];
    std::fill(in, in + W, 1.0);
    const int64_t len = std::min<int64_t>(W, n - i);
    std::copy(u + i, u + i + len, in);
    const VD l = log_lanes(load(in));
    std::memcpy(res, &l, sizeof(l));
    std::copy(res, res + len, out + i);
  }
#else
  for (int64_t i = 0; i < n; ++i) out[i] = std::log(u[i]);
#endif
}

void fast_sincos(const double* th, double* s, double* c, int64_t n) {
#if SNUG_NORMAL_LANES > 0
  for (int64_t i = 0; i < n; i += W) {
    double in[W] = {}, rs[W], rc[W];
    const int64_t len = std::min<int64_t>(W, n - i);
    std::copy(th + i, th + i + len, in);
    VD vs, vc;
    sincos_lanes(load(in), &vs, &vc);
    std::memcpy(rs, &vs, sizeof(vs));
    std::memcpy(rc, &vc, sizeof(vc));
    std::copy(rs, rs + len, s + i);
    std::copy(rc, rc + len, c + i);
  }
#else
  for (int64_t i = 0; i < n; ++i) {
    s[i] = std::sin(th[i]);
    c[i] = std::cos(th[i]);
  }
#endif
}

}  // namespace snug::detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
