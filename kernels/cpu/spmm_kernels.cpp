// OpenMP SpMM: C = A·B (+ beta·C) row-parallel with nonzero-balanced row ranges (B in float32,
// float64 or bfloat16), and Aᵀ·B with private sums.
#include "tessera/kernels/spmm_kernels.hpp"

#include "parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <omp.h>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tessera::kernels::cpu {
namespace {

// Nonzeros ahead whose B row is prefetched. The rows of B are gathered at random, and without
// this the RMAT scale-20 benchmark (tessera-bench-kernels) runs about 6x slower; for 512-byte
// rows distances from 8 to 32 measured the same within noise. Narrow rows are far less work a
// nonzero, so they look further ahead, about 2 KiB of rows: on the 1M-node SBM graph a width-16
// product took 137 ms at 8 nonzeros ahead and 113-117 ms at 32-64
// (TESSERA_BENCH_DATASET=npz:... tessera-bench-kernels, BM_OutputLayer/1/0).
constexpr std::int64_t kPrefetchDistance = 8;
constexpr std::int64_t kPrefetchBytes = 2048;
constexpr std::int64_t kCacheLine = 64;

/// The nonzeros [begin, end) of one row of A, and where prefetching ahead must stop.
template <typename T> struct SparseRow {
  const LocalId* col;
  const T* val;
  std::int64_t begin;
  std::int64_t end;
  std::int64_t prefetch_end;
};

/// An element of B as the value type T: bfloat16 widens exactly (a shift).
template <typename T> T widen(T value) {
  return value;
}
inline float widen(Bf16 value) {
  return to_float(value);
}

/// acc + v·b, rounded once (a fused multiply-add) where the machine has FMA. Written out rather
/// than left to the compiler's contraction, which it applies to some loops and not others (on
/// AVX2 it fused the float row blocks but not the bfloat16 tails): every path rounds alike, so
/// the bfloat16 SpMM is the float one over the widened input, bit for bit, on any build.
template <typename T> inline T multiply_add(T v, T b, T acc) {
#if defined(__FMA__)
  return std::fma(v, b, acc);
#else
  return acc + v * b;
#endif
}

/// The B row `k + distance` nonzeros ahead, while nonzeros remain before `prefetch_end`.
template <typename T, typename B>
void prefetch_ahead(const SparseRow<T>& a, std::int64_t k, std::int64_t distance, const B* b,
                    std::int64_t ldb, std::int64_t bytes) {
  if (k + distance < a.prefetch_end) {
    const auto* ahead = reinterpret_cast<const char*>(b + a.col[k + distance] * ldb);
    for (std::int64_t byte = 0; byte < bytes; byte += kCacheLine)
      __builtin_prefetch(ahead + byte);
  }
}

#if defined(__AVX512F__)
// GCC 12 warns falsely inside its own _mm512_slli_epi32 (GCC bug 105593), as in random_lanes.hpp.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
/// spmm_row_block over bfloat16 rows of W columns (W a multiple of 32) without shuffles. Widening
/// element by element took a zero-extending shuffle (vpmovzxwd) or two per 16 columns, on the one
/// shuffle port. Here a 64-byte load holds 32 columns as 16 pairs: a shift left by 16 is the even
/// columns as float32 and a mask of the high halves the odd ones, summed in two sets of registers
/// that are interleaved back once per row. Each column's sum is spmm_row_block's, the same
/// fused multiply-adds in the same order: bit for bit the same output.
template <int W>
void spmm_row_block_bf16_pairs(const SparseRow<float>& a, const Bf16* b, std::int64_t ldb,
                               float* c) {
  static_assert(W % 32 == 0);
  constexpr int kVectors = W / 32;
  constexpr std::int64_t kBlockBytes = std::int64_t{W} * sizeof(Bf16);
  constexpr std::int64_t kDistance = std::max(kPrefetchDistance, kPrefetchBytes / kBlockBytes);
  const __m512i high_halves = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512 even[kVectors], odd[kVectors];
  for (int q = 0; q < kVectors; ++q)
    even[q] = odd[q] = _mm512_setzero_ps();
  for (std::int64_t k = a.begin; k < a.end; ++k) {
    prefetch_ahead(a, k, kDistance, b, ldb, kBlockBytes);
    const Bf16* b_row = b + a.col[k] * ldb;
    const __m512 v = _mm512_set1_ps(a.val[k]);
    for (int q = 0; q < kVectors; ++q) {
      const __m512i pairs = _mm512_loadu_si512(b_row + 32 * q);
      even[q] = _mm512_fmadd_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16)), even[q]);
      odd[q] =
          _mm512_fmadd_ps(v, _mm512_castsi512_ps(_mm512_and_si512(pairs, high_halves)), odd[q]);
    }
  }
  // Column 32q + 2i is even[q][i], column 32q + 2i + 1 is odd[q][i].
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int q = 0; q < kVectors; ++q) {
    _mm512_storeu_ps(c + 32 * q, _mm512_permutex2var_ps(even[q], first, odd[q]));
    _mm512_storeu_ps(c + 32 * q + 16, _mm512_permutex2var_ps(even[q], second, odd[q]));
  }
}
#pragma GCC diagnostic pop
#endif

/// Columns [0, W) of one output row: the accumulators live in registers for the whole row
/// (W is a compile-time width), so C is written exactly once, and read once (beta · C) only when
/// Accumulate: the choice is made once per call, so the overwrite path has no branch and no read.
/// b points at column 0 of the block; B is T or bfloat16 (the same sums as over B widened).
template <bool Accumulate, int W, typename T, typename B>
void spmm_row_block(const SparseRow<T>& a, const B* b, std::int64_t ldb, T beta, T* c) {
#if defined(__AVX512F__)
  if constexpr (!Accumulate && std::is_same_v<B, Bf16> && W % 32 == 0) {
    return spmm_row_block_bf16_pairs<W>(a, b, ldb, c);
  }
#endif
  constexpr std::int64_t kBlockBytes = std::int64_t{W} * sizeof(B);
  constexpr std::int64_t kDistance = std::max(kPrefetchDistance, kPrefetchBytes / kBlockBytes);
  T acc[W] = {};
  for (std::int64_t k = a.begin; k < a.end; ++k) {
    prefetch_ahead(a, k, kDistance, b, ldb, kBlockBytes);
    const B* b_row = b + a.col[k] * ldb;
    const T v = a.val[k];
#pragma omp simd
    for (int j = 0; j < W; ++j)
      acc[j] = multiply_add(v, widen(b_row[j]), acc[j]);
  }
  if constexpr (Accumulate) {
#pragma omp simd
    for (int j = 0; j < W; ++j)
      c[j] = acc[j] + beta * c[j];
  } else {
#pragma omp simd
    for (int j = 0; j < W; ++j)
      c[j] = acc[j];
  }
}

/// The columns [j, n) of one output row narrower than 2W, in blocks of W, W/2, ..., 1.
template <bool Accumulate, int W, typename T, typename B>
void spmm_row_tail(const SparseRow<T>& a, const B* b, std::int64_t n, std::int64_t j, T beta,
                   T* c) {
  if constexpr (W > 0) {
    if (n - j >= W) {
      spmm_row_block<Accumulate, W>(a, b + j, n, beta, c + j);
      j += W;
    }
    spmm_row_tail<Accumulate, W / 2>(a, b, n, j, beta, c);
  }
}

/// One output row [n]: 512-byte column blocks (eight AVX-512 registers of accumulators), then
/// the remainder in power-of-two blocks.
template <bool Accumulate, typename T, typename B>
void spmm_row(const SparseRow<T>& a, const B* b, std::int64_t n, T beta, T* c) {
  constexpr int kWide = 512 / sizeof(T);
  std::int64_t j = 0;
  for (; j + kWide <= n; j += kWide)
    spmm_row_block<Accumulate, kWide>(a, b + j, n, beta, c + j);
  spmm_row_tail<Accumulate, kWide / 2>(a, b, n, j, beta, c);
}

/// All rows of C = A·B (+ beta·C when Accumulate), split over the threads by nonzeros.
template <bool Accumulate, typename T, typename B>
void spmm_rows(CsrView<T> a, ConstDenseView<B> b, DenseView<T> c, T beta) {
  const std::int64_t n = c.cols;
#pragma omp parallel
  {
    const Range rows =
        balanced_rows(a.row_ptr, a.rows, omp_get_thread_num(), omp_get_num_threads());
    const std::int64_t prefetch_end = a.row_ptr[rows.end];
    for (std::int64_t r = rows.begin; r < rows.end; ++r) {
      const SparseRow<T> row{a.col, a.val, a.row_ptr[r], a.row_ptr[r + 1], prefetch_end};
      spmm_row<Accumulate>(row, b.data, n, beta, c.row(r));
    }
  }
}

} // namespace

template <typename T>
void spmm(const Backend&, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c, T beta) {
  if (a.rows == 0 || c.cols == 0) return;
  if (beta == T{0}) {
    spmm_rows<false>(a, b, c, beta);
  } else {
    spmm_rows<true>(a, b, c, beta);
  }
}

void spmm_bf16(const Backend&, CsrView<float> a, ConstDenseView<Bf16> b, DenseView<float> c) {
  if (a.rows == 0 || c.cols == 0) return;
  spmm_rows<false>(a, b, c, 0.0f);
}

template <typename T>
void spmm_transpose(const Backend&, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c) {
  const std::int64_t n = c.cols;
  const std::int64_t size = c.size();
  if (size == 0) return;
  // Thread 0 sums straight into C, every other thread into a private copy of C that is added in
  // thread order at the end (deterministic for a given thread count): (threads - 1) · k · n
  // elements, small for the small k this kernel is meant for, and reused across calls.
  const int max_threads = omp_get_max_threads();
  T* scratch = reusable_scratch<T>(static_cast<std::size_t>(size) * (max_threads - 1));
#pragma omp parallel
  {
    const int thread = omp_get_thread_num();
    const int threads = omp_get_num_threads();
    T* acc = thread == 0 ? c.data : scratch + (thread - 1) * size;
    for (std::int64_t i = 0; i < size; ++i)
      acc[i] = T{0};
    const Range rows = a.rows == 0 ? Range{} : balanced_rows(a.row_ptr, a.rows, thread, threads);
    for (std::int64_t r = rows.begin; r < rows.end; ++r) {
      const T* b_row = b.row(r);
      for (std::int64_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
        T* out = acc + a.col[k] * n;
        const T v = a.val[k];
#pragma omp simd
        for (std::int64_t j = 0; j < n; ++j)
          out[j] += v * b_row[j];
      }
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < size; ++i) {
      T sum = c.data[i];
      for (int t = 1; t < threads; ++t)
        sum += scratch[(t - 1) * size + i];
      c.data[i] = sum;
    }
  }
}

TESSERA_INSTANTIATE_SPMM_KERNELS(float);
TESSERA_INSTANTIATE_SPMM_KERNELS(double);

} // namespace tessera::kernels::cpu
