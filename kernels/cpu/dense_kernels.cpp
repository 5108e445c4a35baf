// OpenMP and BLAS dense kernels: GEMM (through cblas, or kernels of our own for tall products
// with a small side), copy, axpy, bias add and bias gradient.
#include "tessera/kernels/dense_kernels.hpp"

#include "parallel.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <cblas.h>
#include <climits>
#include <cstdint>
#include <omp.h>
#include <string>
#include <type_traits>

namespace tessera::kernels::cpu {
namespace {

CBLAS_TRANSPOSE to_cblas(Transpose t) {
  return t == Transpose::Yes ? CblasTrans : CblasNoTrans;
}

/// BLAS here takes 32-bit dimensions.
int blas_int(std::int64_t value, const char* what) {
  if (value > INT_MAX) {
    throw InvalidArgument(std::string("gemm: ") + what + " = " + std::to_string(value) +
                          " exceeds the BLAS index range (2^31 - 1)");
  }
  return static_cast<int>(value);
}

/// c = beta · c, with beta = 0 overwriting (as BLAS does, so NaNs in c do not survive).
template <typename T> void scale(T beta, DenseView<T> c) {
  const std::int64_t size = c.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    c.data[i] = beta == T{0} ? T{0} : beta * c.data[i];
}

// ---- Tall-skinny products -------------------------------------------------------------------
// OpenBLAS runs [n, 128] x [128, 16], [n, 16] x [16, 128] and [128, n] x [n, 16] (a GCN's output
// layer) at ~40 GFLOP/s on one thread and no faster on two (tessera-bench-kernels BM_OutputLayer,
// against ~95 on one for [n, 128] x [128, 128], which the panels below take): these run here,
// rows split over the threads, each output row's accumulators in registers.

/// The most rows of B a narrow product keeps (B is copied to [k, N] once per call).
constexpr std::int64_t kSmallInner = 1024;
/// Below this many rows OpenBLAS's own overheads are small: the products go to it.
constexpr std::int64_t kTallRows = 4096;

/// c[0, n) = alpha · sums + beta · c; beta = 0 overwrites, as BLAS does (NaNs in c do not survive).
template <typename T> void store_scaled(T alpha, const T* sums, T beta, T* c, std::int64_t n) {
  if (beta == T{0}) {
#pragma omp simd
    for (std::int64_t j = 0; j < n; ++j)
      c[j] = alpha * sums[j];
  } else {
#pragma omp simd
    for (std::int64_t j = 0; j < n; ++j)
      c[j] = alpha * sums[j] + beta * c[j];
  }
}

/// c [K, n] = alpha · (the per-thread sums `partial`, [threads][K · n], added in thread order
/// into thread 0's) + beta · c: the same result run to run for a thread count.
template <typename T>
void store_thread_sums(T alpha, T* partial, int threads, T beta, DenseView<T> c) {
  const std::int64_t size = c.rows * c.cols;
  for (int t = 1; t < threads; ++t) {
#pragma omp simd
    for (std::int64_t e = 0; e < size; ++e)
      partial[e] += partial[t * size + e];
  }
  for (std::int64_t i = 0; i < c.rows; ++i)
    store_scaled(alpha, partial + i * c.cols, beta, c.row(i), c.cols);
}

/// c = alpha · a · B + beta · c, B [k, N] row-major (`bk`), a [m, k], c [m, N]; rows over threads.
/// A narrow N takes kRows rows at a time, eight vectors of sums in all: each row of B loaded
/// from cache serves kRows of them, and eight independent chains of FMAs hide the FMA latency
/// (with one row of 16 the chain alone bounds it at ~4 cycles an FMA).
template <int N, typename T>
void tall_times_small(T alpha, ConstDenseView<T> a, const T* bk, T beta, DenseView<T> c) {
  constexpr int kRows = N >= 128 ? 1 : 128 / N;
  const std::int64_t k = a.cols;
  const std::int64_t groups = (a.rows + kRows - 1) / kRows;
#pragma omp parallel for schedule(static)
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t first = g * kRows;
    const int rows = static_cast<int>(std::min<std::int64_t>(kRows, a.rows - first));
    T sums[kRows][N] = {};
    if (rows == kRows) {
      // The next group's rows, a cache line each every 64 bytes of columns: the hardware
      // prefetcher alone left this loop at a third of the read bandwidth.
      const bool next = first + 2 * kRows <= a.rows;
      constexpr std::int64_t kLine = 64 / sizeof(T);
      for (std::int64_t i = 0; i < k; ++i) {
        if (next && i % kLine == 0) {
          for (int q = 0; q < kRows; ++q)
            __builtin_prefetch(a.row(first + kRows + q) + i);
        }
        const T* br = bk + i * N;
        for (int q = 0; q < kRows; ++q) {
          const T x = a.row(first + q)[i];
#pragma omp simd
          for (int j = 0; j < N; ++j)
            sums[q][j] += x * br[j];
        }
      }
    } else {
      for (int q = 0; q < rows; ++q) {
        const T* ar = a.row(first + q);
        for (std::int64_t i = 0; i < k; ++i) {
          const T* br = bk + i * N;
#pragma omp simd
          for (int j = 0; j < N; ++j)
            sums[q][j] += ar[i] * br[j];
        }
      }
    }
    for (int q = 0; q < rows; ++q)
      store_scaled(alpha, sums[q], beta, c.row(first + q), N);
  }
}

/// c = alpha · aᵀ · b + beta · c, a [m, K], b [m, N], c [K, N]: per-thread sums over static
/// static row ranges, added in thread order (reproducible for a thread count), four rows of a at
/// a time per pass over the sums.
template <int N, typename T>
void tall_transpose_times_tall(T alpha, ConstDenseView<T> a, ConstDenseView<T> b, T beta,
                               DenseView<T> c) {
  const std::int64_t m = a.rows, kk = a.cols;
  constexpr std::int64_t kLine = 64 / sizeof(T);
  const int threads = omp_get_max_threads();
  T* partial = reusable_scratch<T>(static_cast<std::size_t>(threads * kk * N));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), used = omp_get_num_threads();
    T* sum = partial + static_cast<std::int64_t>(t) * kk * N;
    std::fill(sum, sum + kk * N, T{0});
    const std::int64_t begin = m * t / used, end = m * (t + 1) / used;
    std::int64_t r = begin;
    for (; r + 4 <= end; r += 4) {
      const T *a0 = a.row(r), *a1 = a.row(r + 1), *a2 = a.row(r + 2), *a3 = a.row(r + 3);
      T b4[4][N]; // the four rows of b, local so the loop below keeps them in registers
      for (int q = 0; q < 4; ++q) {
#pragma omp simd
        for (int j = 0; j < N; ++j)
          b4[q][j] = b.row(r + q)[j];
      }
      const bool next = r + 8 <= end; // prefetch the next four rows of a, as tall_times_small
      for (std::int64_t i = 0; i < kk; ++i) {
        if (next && i % kLine == 0) {
          for (int q = 4; q < 8; ++q)
            __builtin_prefetch(a.row(r + q) + i);
        }
        T* s = sum + i * N;
        const T x0 = a0[i], x1 = a1[i], x2 = a2[i], x3 = a3[i];
#pragma omp simd
        for (int j = 0; j < N; ++j)
          s[j] += (x0 * b4[0][j] + x1 * b4[1][j]) + (x2 * b4[2][j] + x3 * b4[3][j]);
      }
    }
    for (; r < end; ++r) {
      const T* ar = a.row(r);
      const T* br = b.row(r);
      for (std::int64_t i = 0; i < kk; ++i) {
        T* s = sum + i * N;
        const T x = ar[i];
#pragma omp simd
        for (int j = 0; j < N; ++j)
          s[j] += x * br[j];
      }
    }
  }
  store_thread_sums(alpha, partial, threads, beta, c);
}

// ---- Products with a small square B ---------------------------------------------------------
// OpenBLAS runs [n, 128] x [128, 128] (a hidden layer's transform) and its weight gradient
// [128, n] x [n, 128] at ~95-100 GFLOP/s on one thread here, against ~146 for large squares: with
// 128 the short side, packing is much of its work. These read a (and b) in place, in chunks of
// rows that stay in L1 and L2 while register tiles of 6 rows x one panel (four 64-byte vectors)
// run over them, and prefetch the next chunk (tessera-bench-kernels BM_Sgemm).

/// Whether the panels run at all: AVX-512's 32 vector registers hold a 6 x 4 tile; with AVX2's 16,
/// the tiles that fit ran at 0.6-0.9x OpenBLAS's Haswell kernel (-march=x86-64-v3 on this
/// machine), so there these products stay with BLAS.
#if defined(__AVX512F__)
constexpr bool kPanelKernels = true;
#else
constexpr bool kPanelKernels = false;
#endif
/// One column panel: four vectors of 64 bytes (64 floats, 32 doubles).
template <typename T> constexpr int kPanel = 256 / static_cast<int>(sizeof(T));
/// Rows of a register tile: 6 x 4 vectors of sums, 4 of the panel's row and one broadcast fill
/// 29 of the 32 vector registers.
constexpr int kPanelRows = 6;
/// The shapes the panels take: B at most [512, 256] (measured against OpenBLAS at 64-512 x 64-256).
constexpr std::int64_t kPanelInner = 512;
constexpr std::int64_t kPanelWidth = 256;
/// Rows of a chunk: eleven tiles of 6; 33 KiB of 128-float rows, beside a 32 KiB panel of B.
constexpr std::int64_t kChunkRows = 11 * kPanelRows;

/// Prefetches the next chunk, `rows` rows of x from `first`, a share of its cache lines before each
/// of the `tiles` tiles that run over the current chunk.
template <typename T> struct ChunkPrefetch {
  static constexpr std::int64_t kLine = 64 / sizeof(T);
  const T* data;
  std::int64_t lines, step, line = 0;

  ChunkPrefetch(ConstDenseView<T> x, std::int64_t first, std::int64_t rows, std::int64_t tiles)
      : data(rows > 0 ? x.row(first) : nullptr), lines(rows > 0 ? rows * x.cols / kLine : 0),
        step((lines + tiles - 1) / tiles) {}

  void share() noexcept {
    for (const std::int64_t end = std::min(lines, line + step); line < end; ++line)
      __builtin_prefetch(data + line * kLine);
  }
};

/// c[first, first + R) x panel p = alpha · a · B + beta · c for R rows from `first`, B as column
/// panels (`panels`: panel p holds B[:, p·P, (p + 1)·P) row-major, contiguous, so its k rows sit
/// in L1 without the set conflicts of B's own 512-byte stride). Each row's sums run over k in
/// order, so a row's result does not depend on R or on where the rows are split.
template <int R, typename T>
void panel_rows(T alpha, ConstDenseView<T> a, const T* panels, std::int64_t p, T beta,
                DenseView<T> c, std::int64_t first) {
  constexpr int P = kPanel<T>;
  const std::int64_t k = a.cols;
  const T* panel = panels + p * k * P;
  T sums[R][P] = {};
  for (std::int64_t i = 0; i < k; ++i) {
    const T* br = panel + i * P;
#pragma GCC unroll 8
    for (int q = 0; q < R; ++q) {
      const T x = a.row(first + q)[i];
#pragma omp simd
      for (int j = 0; j < P; ++j)
        sums[q][j] += x * br[j];
    }
  }
  for (int q = 0; q < R; ++q)
    store_scaled(alpha, sums[q], beta, c.row(first + q) + p * P, P);
}

/// B [k, n] (or its transpose given as [n, k]) copied into column panels, in reused scratch.
template <typename T>
const T* as_panels(Transpose trans_b, ConstDenseView<T> b, std::int64_t k, std::int64_t n) {
  constexpr int P = kPanel<T>;
  T* panels = reusable_scratch<T>(static_cast<std::size_t>(k * n));
  for (std::int64_t p = 0; p < n / P; ++p) {
    for (std::int64_t i = 0; i < k; ++i) {
      T* row = panels + (p * k + i) * P;
      if (trans_b == Transpose::No) {
        const T* from = b.row(i) + p * P;
#pragma omp simd
        for (int j = 0; j < P; ++j)
          row[j] = from[j];
      } else {
        for (int j = 0; j < P; ++j)
          row[j] = b.row(p * P + j)[i];
      }
    }
  }
  return panels;
}

/// c = alpha · a · B + beta · c, a [m, k], B [k, n] as column panels, n a multiple of the panel:
/// chunks of rows over the threads, each chunk panel by panel.
template <typename T>
void tall_times_panels(T alpha, ConstDenseView<T> a, const T* panels, T beta, DenseView<T> c) {
  const std::int64_t chunks = (a.rows + kChunkRows - 1) / kChunkRows;
  const std::int64_t panel_count = c.cols / kPanel<T>;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t first = chunk * kChunkRows, end = std::min(a.rows, first + kChunkRows);
    ChunkPrefetch<T> next(a, end, std::min(kChunkRows, a.rows - end),
                          panel_count * (kChunkRows / kPanelRows));
    for (std::int64_t p = 0; p < panel_count; ++p) {
      std::int64_t r = first;
      for (; r + kPanelRows <= end; r += kPanelRows) {
        next.share();
        panel_rows<kPanelRows>(alpha, a, panels, p, beta, c, r);
      }
      for (; r < end; ++r)
        panel_rows<1>(alpha, a, panels, p, beta, c, r);
    }
  }
}

/// sums[0, R) x [0, P) += a[:, 0, R)ᵀ · b[:, 0, P) over `rows` rows (row strides lda, ldb):
/// R rows of the sums, one panel wide, in registers over the rows.
template <int R, typename T>
void transposed_tile(const T* a, std::int64_t lda, const T* b, std::int64_t ldb, int rows, T* sums,
                     std::int64_t ld_sums) {
  constexpr int P = kPanel<T>;
  T s[R][P] = {};
  for (int r = 0; r < rows; ++r) {
    const T* ar = a + r * lda;
    const T* br = b + r * ldb;
#pragma GCC unroll 8
    for (int q = 0; q < R; ++q) {
      const T x = ar[q];
#pragma omp simd
      for (int j = 0; j < P; ++j)
        s[q][j] += x * br[j];
    }
  }
  for (int q = 0; q < R; ++q) {
    T* sr = sums + q * ld_sums;
#pragma omp simd
    for (int j = 0; j < P; ++j)
      sr[j] += s[q][j];
  }
}

/// c = alpha · aᵀ · b + beta · c, a [m, K], b [m, N], c [K, N], N a multiple of the panel: each
/// thread sums its static range of rows chunk by chunk into its own [K, N] sums, prefetching the
/// next chunk while the tiles run over this one (without it, waits on memory held this at
/// OpenBLAS's rate); the sums are added in thread order (reproducible for a thread count).
template <typename T>
void tall_transpose_times_panels(T alpha, ConstDenseView<T> a, ConstDenseView<T> b, T beta,
                                 DenseView<T> c) {
  constexpr int P = kPanel<T>;
  const std::int64_t m = a.rows, kk = a.cols, n = b.cols;
  const int threads = omp_get_max_threads();
  T* partial = reusable_scratch<T>(static_cast<std::size_t>(threads * kk * n));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    T* sums = partial + static_cast<std::int64_t>(t) * kk * n;
    std::fill(sums, sums + kk * n, T{0});
    const Range range = static_range(m, t, omp_get_num_threads());
    const std::int64_t tiles = std::max<std::int64_t>(1, (n / P) * (kk / kPanelRows));
    for (std::int64_t first = range.begin; first < range.end; first += kChunkRows) {
      const int rows = static_cast<int>(std::min(kChunkRows, range.end - first));
      const std::int64_t next = first + rows, next_rows = std::min(kChunkRows, range.end - next);
      ChunkPrefetch<T> next_a(a, next, next_rows, tiles), next_b(b, next, next_rows, tiles);
      for (std::int64_t p = 0; p < n / P; ++p) {
        const T* bp = b.row(first) + p * P;
        std::int64_t i = 0;
        for (; i + kPanelRows <= kk; i += kPanelRows) {
          next_a.share();
          next_b.share();
          transposed_tile<kPanelRows>(a.row(first) + i, kk, bp, n, rows, sums + i * n + p * P, n);
        }
        for (; i < kk; ++i)
          transposed_tile<1>(a.row(first) + i, kk, bp, n, rows, sums + i * n + p * P, n);
      }
    }
  }
  store_thread_sums(alpha, partial, threads, beta, c);
}

/// Runs `f` with N = n as a compile-time width when n is one the narrow kernels take; false
/// otherwise.
template <typename F> bool with_narrow_width(std::int64_t n, F f) {
  switch (n) {
  case 16:
    f(std::integral_constant<int, 16>{});
    return true;
  case 32:
    f(std::integral_constant<int, 32>{});
    return true;
  case 64:
    f(std::integral_constant<int, 64>{});
    return true;
  case 128:
    f(std::integral_constant<int, 128>{});
    return true;
  default:
    return false;
  }
}

/// The tall-skinny products above when the shape is one of theirs; false to leave it to BLAS.
template <typename T>
bool narrow_gemm(Transpose trans_a, Transpose trans_b, T alpha, ConstDenseView<T> a,
                 ConstDenseView<T> b, T beta, DenseView<T> c) {
  const std::int64_t m = c.rows, n = c.cols;
  if (trans_a == Transpose::No) { // c [m, n] = a [m, k] · B, B small
    const std::int64_t k = a.cols;
    if (m < kTallRows || k > kSmallInner) return false;
    if (std::min(k, n) > 32) {
      constexpr int P = kPanel<T>;
      if (!kPanelKernels || k > kPanelInner || n > kPanelWidth || n % P != 0) return false;
      tall_times_panels(alpha, a, as_panels(trans_b, b, k, n), beta, c);
      return true;
    }
    T* bk = reusable_scratch<T>(static_cast<std::size_t>(k * n));
    for (std::int64_t i = 0; i < k; ++i) {
      for (std::int64_t j = 0; j < n; ++j)
        bk[i * n + j] = trans_b == Transpose::No ? b.row(i)[j] : b.row(j)[i];
    }
    return with_narrow_width(
        n, [&](auto width) { tall_times_small<decltype(width)::value>(alpha, a, bk, beta, c); });
  }
  // c [K, n] = aᵀ · b over the m = a.rows rows both share, b narrow or whole panels.
  if (trans_b != Transpose::No || a.rows < kTallRows || m > kSmallInner) return false;
  if (n > 32) {
    if (!kPanelKernels || m > kPanelInner || n > kPanelWidth || n % kPanel<T> != 0) return false;
    tall_transpose_times_panels(alpha, a, b, beta, c);
    return true;
  }
  return with_narrow_width(n, [&](auto width) {
    tall_transpose_times_tall<decltype(width)::value>(alpha, a, b, beta, c);
  });
}

} // namespace

template <typename T>
void gemm(const Backend&, Transpose trans_a, Transpose trans_b, T alpha,
          ConstDenseView<T> a, ConstDenseView<T> b, T beta, DenseView<T> c) {
  const std::int64_t m = c.rows;
  const std::int64_t n = c.cols;
  const std::int64_t k = trans_a == Transpose::No ? a.cols : a.rows;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // The product is empty; BLAS would also reject the leading dimension 0 of A or B.
    scale(beta, c);
    return;
  }
  if (narrow_gemm(trans_a, trans_b, alpha, a, b, beta, c)) return;
  // From here every operand has rows and columns >= 1, so every leading dimension is >= 1.
  const int bm = blas_int(m, "m");
  const int bn = blas_int(n, "n");
  const int bk = blas_int(k, "k");
  const int lda = blas_int(a.cols, "lda");
  const int ldb = blas_int(b.cols, "ldb");
  const int ldc = blas_int(c.cols, "ldc");
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), bm, bn, bk, alpha, a.data, lda,
                b.data, ldb, beta, c.data, ldc);
  } else {
    static_assert(std::is_same_v<T, double>);
    cblas_dgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), bm, bn, bk, alpha, a.data, lda,
                b.data, ldb, beta, c.data, ldc);
  }
}

template <typename T> void copy(const Backend&, ConstDenseView<T> x, DenseView<T> y) {
  if (x.data == y.data) return;
  const std::int64_t size = x.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    y.data[i] = x.data[i];
}

void round_to_bf16(const Backend&, ConstDenseView<float> x, DenseView<Bf16> y) {
  const std::int64_t size = x.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    y.data[i] = to_bf16(x.data[i]);
}

namespace {

/// rows[i] must index one of `n` rows (a serial pass, small next to the copy that follows).
void check_row_ids(const char* op, std::span<const LocalId> rows, std::int64_t n) {
  for (const LocalId r : rows) {
    if (r < 0 || r >= n) {
      throw InvalidArgument(std::string(op) + ": row " + std::to_string(r) + " outside [0, " +
                            std::to_string(n) + ")");
    }
  }
}

} // namespace

template <typename T>
void gather_rows(const Backend&, ConstDenseView<T> x, std::span<const LocalId> rows,
                 DenseView<T> out) {
  check_row_ids("gather_rows", rows, x.rows);
  const std::int64_t f = x.cols;
  const auto m = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < m; ++i) {
    const T* src = x.data + static_cast<std::int64_t>(rows[i]) * f;
    T* dst = out.data + i * f;
#pragma omp simd
    for (std::int64_t c = 0; c < f; ++c) dst[c] = src[c];
  }
}

template <typename T>
void scatter_add_rows(const Backend&, ConstDenseView<T> x, std::span<const LocalId> rows,
                      DenseView<T> out) {
  check_row_ids("scatter_add_rows", rows, out.rows);
  const std::int64_t f = x.cols;
  const auto m = static_cast<std::int64_t>(rows.size());
  // Rows are distinct, so threads never write the same output row.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < m; ++i) {
    const T* src = x.data + i * f;
    T* dst = out.data + static_cast<std::int64_t>(rows[i]) * f;
#pragma omp simd
    for (std::int64_t c = 0; c < f; ++c) dst[c] += src[c];
  }
}

template <typename T> void add_bias(const Backend&, DenseView<T> x, std::span<const T> bias) {
  const std::int64_t f = x.cols;
  const T* bias_data = bias.data();
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < x.rows; ++r) {
    T* row = x.row(r);
#pragma omp simd
    for (std::int64_t j = 0; j < f; ++j)
      row[j] += bias_data[j];
  }
}

template <typename T> void axpy(const Backend&, T alpha, std::span<const T> x, std::span<T> y) {
  const auto size = static_cast<std::int64_t>(y.size());
  const T* in = x.data();
  T* out = y.data();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    out[i] += alpha * in[i];
}

template <typename T>
void bias_grad(const Backend&, ConstDenseView<T> dy, std::span<T> d_bias, bool accumulate) {
  const std::int64_t f = dy.cols;
  if (f == 0) return;
  // Each thread sums a fixed slice of rows in double; the partials are added in thread order,
  // so the result is the same run to run for a given thread count.
  const int max_threads = omp_get_max_threads();
  double* partial = reusable_scratch<double>(static_cast<std::size_t>(f) * max_threads);
#pragma omp parallel
  {
    const int thread = omp_get_thread_num();
    const int threads = omp_get_num_threads();
    double* sum = partial + thread * f;
    for (std::int64_t j = 0; j < f; ++j)
      sum[j] = 0.0;
    const Range rows = static_range(dy.rows, thread, threads);
    for (std::int64_t r = rows.begin; r < rows.end; ++r) {
      const T* row = dy.row(r);
#pragma omp simd
      for (std::int64_t j = 0; j < f; ++j)
        sum[j] += row[j];
    }
#pragma omp barrier
#pragma omp for schedule(static)
    for (std::int64_t j = 0; j < f; ++j) {
      double total = accumulate ? static_cast<double>(d_bias[j]) : 0.0;
      for (int t = 0; t < threads; ++t)
        total += partial[t * f + j];
      d_bias[j] = static_cast<T>(total);
    }
  }
}

TESSERA_INSTANTIATE_DENSE_KERNELS(float);
TESSERA_INSTANTIATE_DENSE_KERNELS(double);

} // namespace tessera::kernels::cpu
