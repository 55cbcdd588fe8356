// twohot ``mean`` (spec/twohot.py "mean"; rlspec/fast/twohot.py builds and loads this file):
//
//   l [R, n] logits (one row per prediction, contiguous)   m = max_k l_k
//   y = Σ_k e^{l_k − m}·b_k / Σ_k e^{l_k − m}                                        (= softmax(l) · b)
//   out = symexp(y) = sign(y)·(e^{|y|} − 1)                                           (std::expm1, per row)
//
// Two passes over each row while it sits in L1 (the max, then both sums in one loop): the logits are read
// from memory once and nothing of size [R, n] is written (softmax then a product with the bins reads them
// once and writes and rereads the probabilities). e^x is cpu_kernels.h's vectorized polynomial, below
// −87 exactly 0 as torch's exp underflows. A row holding a NaN, or whose maximum is ±inf, gives NaN, as
// torch.softmax does there (inf − inf). Sums accumulate in the input's precision (torch's softmax too).
// symexp is taken here, not by torch afterwards: a parallel torch op leaves its OpenMP threads spinning for
// about a millisecond, and this kernel's second std::thread would share a core with one of them.
#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu_kernels.h"

namespace {

template <typename T>
inline T exp_or_zero(T x) {
  return x < T(-87) ? T(0) : exp_nonpositive(x);
}

template <typename T>
void mean_rows(const T* logits, const T* bins, T* out, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* l = logits + r * n;
    T m = -std::numeric_limits<T>::infinity(), nans = 0;
#pragma omp simd reduction(max : m) reduction(+ : nans)
    for (int64_t k = 0; k < n; ++k) {  // a select, not std::max: GCC vectorizes this reduction 3-4x faster
      m = m > l[k] ? m : l[k];
      nans += l[k] != l[k] ? T(1) : T(0);
    }
    T s = 0, sb = 0;
#pragma omp simd reduction(+ : s, sb)
    for (int64_t k = 0; k < n; ++k) {
      const T e = exp_or_zero(l[k] - m);
      s += e;
      sb += e * bins[k];
    }
    const T y = (nans != 0 || !std::isfinite(m)) ? std::numeric_limits<T>::quiet_NaN() : sb / s;
    out[r] = std::copysign(std::expm1(std::abs(y)), y);
  }
}

}  // namespace

extern "C" {
void twohot_mean_f32(const float* logits, const float* bins, float* out, int64_t R, int64_t n, int threads) {
  split_rows(R, threads, [=](int64_t r0, int64_t r1, int) { mean_rows(logits, bins, out, r0, r1, n); });
}
void twohot_mean_f64(const double* logits, const double* bins, double* out, int64_t R, int64_t n,
                     int threads) {
  split_rows(R, threads, [=](int64_t r0, int64_t r1, int) { mean_rows(logits, bins, out, r0, r1, n); });
}
}
