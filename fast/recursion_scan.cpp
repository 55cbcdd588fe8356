// The backward recursion of the returns family on CPU (fast/recursion.py ``carry_step`` for every t at once;
// rlspec/fast/recursion.py builds and loads this file):
//
//   R_T = last,   R_t = base_t + carry_t·R_{t+1},   exactly base_t where carry_t == 0 (a cut)
//
// base, carry [T, B] and out [T+1, B] contiguous. One pass, the batch vectorized (`omp simd`): the select at a
// cut keeps an inf or NaN after it out of the rows before it (0·inf would be NaN).
#include <cstdint>
#include <cstring>

#include "cpu_kernels.h"

namespace {

template <typename T>
void scan_columns(const T* base, const T* carry, const T* last, T* out, int64_t T_, int64_t B, int64_t c0,
                  int64_t c1) {
  std::memcpy(out + T_ * B + c0, last + c0, sizeof(T) * (c1 - c0));
  for (int64_t t = T_ - 1; t >= 0; --t) {
    const T* b = base + t * B;
    const T* c = carry + t * B;
    const T* next = out + (t + 1) * B;
    T* o = out + t * B;
#pragma omp simd
    for (int64_t j = c0; j < c1; ++j) o[j] = c[j] == T(0) ? b[j] : b[j] + c[j] * next[j];
  }
}

}  // namespace

extern "C" {
void scan_f32(const float* base, const float* carry, const float* last, float* out, int64_t T, int64_t B,
              int threads) {
  split_rows(B, threads, [=](int64_t c0, int64_t c1, int) { scan_columns(base, carry, last, out, T, B, c0, c1); });
}
void scan_f64(const double* base, const double* carry, const double* last, double* out, int64_t T, int64_t B,
              int threads) {
  split_rows(B, threads, [=](int64_t c0, int64_t c1, int) { scan_columns(base, carry, last, out, T, B, c0, c1); });
}
}
