// Shared by the fast twins' C++ CPU kernels (fast/*.cpp, built and loaded by fast/cpu_kernel.py): a
// vectorizable e^x for x <= 0 and a row split over std::threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

// e^x for x <= 0: 2^n · p(r), x = n·ln2 + r, |r| <= ln2/2 (Cephes expf, ~1 ulp); clamped at −87 (e^−87 ≈
// 1.6e−38, the smallest normal float's neighbourhood). std::exp does not vectorize without -ffast-math; this
// does (`omp simd`, with -fno-trapping-math on AVX2: fast/channel_norm.py).
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits;
  std::memcpy(&bits, &p, sizeof bits);
  bits += static_cast<int32_t>(n) << 23;
  std::memcpy(&p, &bits, sizeof bits);
  return p;
}

inline double exp_nonpositive(double x) { return std::exp(x); }

// Runs body(r0, r1, part) on `threads` contiguous row ranges (part = 0..threads−1), joined before return.
template <typename F>
void split_rows(int64_t R, int threads, F body) {
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, R)));
  std::vector<std::thread> pool;
  const int64_t chunk = (R + threads - 1) / threads;
  for (int p = 1; p < threads; ++p)
    pool.emplace_back(body, std::min(R, p * chunk), std::min(R, (p + 1) * chunk), p);
  body(0, std::min(R, chunk), 0);
  for (auto& t : pool) t.join();
}
