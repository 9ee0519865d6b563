// The fast path of NormalGenerator::fill (nn/init.h): Box-Muller pairs on SIMD lanes, equal bit
// for bit to the definition (detail::box_muller, libm) after the rounding to float.
//
// Why it is exact: only float(x) of each normal x = r cos th (or r sin th) is ever used. The lanes
// compute log, sin and cos with polynomials in double (u1 = 1 - f: the fdlibm-style reduction
// to f in [sqrt(1/2) - 1, sqrt(2) - 1] and 2 atanh(f / (2 + f)); th: Cody-Waite reduction by pi/2
// in three parts, then Taylor series through y^17 / y^16), keep sqrt(-2.0 * log u1), 2.0 * pi * u2
// and the products r * cos, r * sin the very operations of the definition, and take a pair's
// floats only where x - B and x + B round to the same float (bit patterns compared: signed zeros
// too), with B = r * 2^-44 + 2^-1000. Rounding to nearest is monotonic, so libm's x, if within B
// of the fast x, rounds to that float as well; anything closer to a float midpoint (tie), and
// r = 0, is recomputed by detail::box_muller.
//
// The bound: the fast log is within 2^-50 (relative) of the true log, the fast sin and cos within
// 2^-51 (absolute); libm's log, sin and cos are within 1 ulp (glibc), so within 2^-52 relative
// and 2^-52 absolute (tests/nn/normal_fill_test.cpp holds all four to these bounds against long
// double; measured maxima: log 2.8 * 2^-53, sin and cos 1.5 * 2^-53; libm 1.0 and 0.5 * 2^-53).
// Half a relative error of the log goes through the sqrt, which rounds once more, so
// |r_fast - r_libm| <= r * (2^-51 + 2^-53 + 2^-53 + 2^-53) < r * 2^-50; |c_fast - c_libm| <
// 2^-50; so |x_fast - x_libm| <= r * 2^-50 + r * 2^-50 + two product roundings (r * 2^-53
// each) < r * 2^-48.5, and B is more than 16 times that. In a fill of random
// values about 1 pair in 40,000 falls back (the test prints the count).
//
// Lanes: 8 under AVX-512 (F + DQ), 4 under AVX2 + FMA, chosen by the build's -march as the
// other kernels (core/dtype.cpp); 0 elsewhere: every pair through detail::box_muller.
#pragma once

#include <cstdint>

namespace snug::detail {

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define SNUG_NORMAL_LANES 8
#elif defined(__AVX2__) && defined(__FMA__)
#define SNUG_NORMAL_LANES 4
#else
#define SNUG_NORMAL_LANES 0
#endif
inline constexpr int kNormalLanes = SNUG_NORMAL_LANES;

// out[0, 2 * pairs) = mean + std * float(the normals of the next `pairs` Box-Muller pairs of the
// SplitMix64 stream whose state is `state` (SplitMix64::state(): pair p takes draws 2p + 1 and
// 2p + 2), each pair's cosine half first. Returns how many pairs the guard sent to the definition.
int64_t fill_normal_pairs(uint64_t state, int64_t pairs, float* out, float mean, float std);

// The same from given uniforms (u1[p], u2[p] in (0, 1]): the lanes' arithmetic on inputs a test
// chooses (r tiny or large, th near multiples of pi/2).
int64_t normal_pairs_from_uniforms(const double* u1, const double* u2, int64_t pairs, float* out,
                                   float mean, float std);

// The lanes' log(u) and (sin th, cos th) for n values (any n; the tail runs on padded lanes), to
// measure their error. Without lanes (kNormalLanes == 0) libm's.
void fast_log(const double* u, double* out, int64_t n);
void fast_sincos(const double* th, double* s, double* c, int64_t n);

}  // namespace snug::detail
