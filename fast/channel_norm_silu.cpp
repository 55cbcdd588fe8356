// Fused LayerNorm over channels + SiLU for channels-last activations (rlspec/fast/channel_norm.py builds
// and loads this file; reference: reference/world_model.py channel_norm, sheeprl's LayerNormChannelLast):
//
//   x [R, C] (one row per pixel, contiguous)   m = mean_c x   v = mean_c (x − m)²   ρ = 1/√(v + eps)
//   x̂ = (x − m)·ρ    u = x̂·w + b    y = u·σ(u)                                          (forward)
//   du = g·σ(u)·(1 + u·(1 − σ(u)))   dw = Σ_r du·x̂   db = Σ_r du                          (backward)
//   dx̂ = du·w    dx = ρ·(dx̂ − mean_c dx̂ − x̂·mean_c(dx̂·x̂))
//
// One read and one write of the activations per direction (the eager composition makes two of each and
// allocates twice). The row loops vectorize over the channels (`omp simd`, -fopenmp-simd: no OpenMP runtime);
// σ uses the polynomial expf of cpu_kernels.h. Built with -fno-trapping-math (no value changes: floating-point
// exception flags are not read): without it GCC keeps both σ loops scalar on AVX2, because the clamp in exp_nonpositive becomes a
// branch around a multiply that "could trap" and only AVX-512's masked instructions let it if-convert
// (benchmarks/kernels/results/channel_norm_vectorization.md). dw, db accumulate in double per thread. Rows are split over
// `threads` std::threads.
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu_kernels.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux >= 5.14
#endif

namespace {

// A fresh output buffer of ~100 MB faults 25k times in 4 KiB pages as the kernel first writes it, which costs
// as much as the kernel itself. Ask for transparent huge pages and map it in one call first. Both are hints
// on memory this call owns: where the kernel refuses them (older Linux, THP off) the writes fault as before.
void prefault(void* p, int64_t bytes) {
  const uintptr_t page = 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes)) & ~(page - 1);
  if (end <= begin + (uintptr_t(2) << 20)) return;  // under 2 MiB: not worth two system calls
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

// σ(u) without overflow: e = e^{−|u|}; σ = 1/(1 + e) for u >= 0, e/(1 + e) otherwise.
template <typename T>
inline T sigmoid(T u) {
  const T e = exp_nonpositive(-std::abs(u));
  const T s = T(1) / (T(1) + e);
  return u >= T(0) ? s : e * s;
}

template <typename T>
void forward_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t r0, int64_t r1,
                  int64_t C, T eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) s += xr[c];
    const T m = s / T(C);
    T v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    const T rs = T(1) / std::sqrt(v / T(C) + eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const T u = (xr[c] - m) * rs * w[c] + b[c];
      yr[c] = u * sigmoid(u);
    }
    mean[r] = m;
    rstd[r] = rs;
  }
}

template <typename T>
void backward_rows(const T* g, const T* x, const T* w, const T* b, const T* mean, const T* rstd, T* dx,
                   double* dw, double* db, int64_t r0, int64_t r1, int64_t C) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* gr = g + r * C;
    const T* xr = x + r * C;
    T* dxr = dx + r * C;
    const T m = mean[r], rs = rstd[r];
    T a = 0, a2 = 0;
#pragma omp simd reduction(+ : a, a2)
    for (int64_t c = 0; c < C; ++c) {
      const T xh = (xr[c] - m) * rs;
      const T u = xh * w[c] + b[c];
      const T s = sigmoid(u);
      const T du = gr[c] * s * (T(1) + u * (T(1) - s));
      dw[c] += double(du * xh);
      db[c] += double(du);
      dxr[c] = du * w[c];  // dx̂, finished below
      a += dxr[c];
      a2 += dxr[c] * xh;
    }
    a /= T(C);
    a2 /= T(C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dxr[c] = rs * (dxr[c] - a - (xr[c] - m) * rs * a2);
  }
}

template <typename T>
void forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t R, int64_t C, double eps,
             int threads) {
  prefault(y, R * C * int64_t(sizeof(T)));
  split_rows(R, threads, [=](int64_t r0, int64_t r1, int) {
    forward_rows(x, w, b, y, mean, rstd, r0, r1, C, T(eps));
  });
}

// dw, db [threads, C] double, zeroed by the caller; the caller sums over threads.
template <typename T>
void backward(const T* g, const T* x, const T* w, const T* b, const T* mean, const T* rstd, T* dx,
              double* dw, double* db, int64_t R, int64_t C, int threads) {
  prefault(dx, R * C * int64_t(sizeof(T)));
  split_rows(R, threads, [=](int64_t r0, int64_t r1, int part) {
    backward_rows(g, x, w, b, mean, rstd, dx, dw + part * C, db + part * C, r0, r1, C);
  });
}

}  // namespace

extern "C" {
void cn_silu_forward_f32(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                         int64_t R, int64_t C, double eps, int threads) {
  forward(x, w, b, y, mean, rstd, R, C, eps, threads);
}
void cn_silu_forward_f64(const double* x, const double* w, const double* b, double* y, double* mean,
                         double* rstd, int64_t R, int64_t C, double eps, int threads) {
  forward(x, w, b, y, mean, rstd, R, C, eps, threads);
}
void cn_silu_backward_f32(const float* g, const float* x, const float* w, const float* b, const float* mean,
                          const float* rstd, float* dx, double* dw, double* db, int64_t R, int64_t C,
                          int threads) {
  backward(g, x, w, b, mean, rstd, dx, dw, db, R, C, threads);
}
void cn_silu_backward_f64(const double* g, const double* x, const double* w, const double* b,
                          const double* mean, const double* rstd, double* dx, double* dw, double* db, int64_t R,
                          int64_t C, int threads) {
  backward(g, x, w, b, mean, rstd, dx, dw, db, R, C, threads);
}
}
