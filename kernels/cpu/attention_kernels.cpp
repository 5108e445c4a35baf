// OpenMP graph attention: each row's edges scored, softmaxed and summed by the thread that owns
// the row (rows split by cost, as the SpMM), so no sum needs an atomic and every result is the
// same for any thread count. The source side runs over aᵀ's rows for the same reason.
#include "tessera/kernels/attention_kernels.hpp"

#include "parallel.hpp"
#include "random_lanes.hpp"
#include "vector_math.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <limits>
#include <omp.h>
#include <type_traits>
#include <vector>

namespace tessera::kernels::cpu {
namespace {

template <typename T> inline T leaky(T v, T slope) {
  return v > T{0} ? v : slope * v;
}

#if defined(__AVX2__) && defined(__FMA__)
/// dots[h] for eight heads of W floats from h0 on: each head's products summed in an 8-lane
/// register, then the eight registers reduced together (horizontal adds and one cross-lane add)
/// into one register of eight dot products. W is a compile-time width so that the loops unroll
/// into independent chains; a per-head reduction left to the compiler summed its lanes one by one
/// through memory.
template <int W>
inline void eight_head_dots(const float* a, const float* b, std::int64_t h0, float* dots) {
  static_assert(W % 8 == 0);
  __m256 p[8];
  for (int j = 0; j < 8; ++j) {
    const float* x = a + (h0 + j) * W;
    const float* y = b + (h0 + j) * W;
    p[j] = _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y));
    for (int f = 8; f < W; f += 8)
      p[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + f), _mm256_loadu_ps(y + f), p[j]);
  }
  const __m256 s0 = _mm256_hadd_ps(_mm256_hadd_ps(p[0], p[1]), _mm256_hadd_ps(p[2], p[3]));
  const __m256 s1 = _mm256_hadd_ps(_mm256_hadd_ps(p[4], p[5]), _mm256_hadd_ps(p[6], p[7]));
  // s0 holds heads 0-3's sums of lanes 0-3 then of lanes 4-7; s1 heads 4-7's.
  _mm256_storeu_ps(dots + h0, _mm256_add_ps(_mm256_permute2f128_ps(s0, s1, 0x20),
                                            _mm256_permute2f128_ps(s0, s1, 0x31)));
}
#endif

/// dots[h] = Σ_f a[h·F + f] · b[h·F + f] for the heads h < H, F = width.
template <typename T>
inline void head_dots(const T* a, const T* b, std::int64_t heads, std::int64_t width, T* dots) {
  std::int64_t h = 0;
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<T, float>) {
    for (; h + 8 <= heads; h += 8) {
      if (width == 8) {
        eight_head_dots<8>(a, b, h, dots);
      } else if (width == 16) {
        eight_head_dots<16>(a, b, h, dots);
      } else if (width == 32) {
        eight_head_dots<32>(a, b, h, dots);
      } else if (width == 64) {
        eight_head_dots<64>(a, b, h, dots);
      } else {
        break;
      }
    }
  }
#endif
  for (; h < heads; ++h) {
    T dot = T{0};
#pragma omp simd reduction(+ : dot)
    for (std::int64_t f = 0; f < width; ++f)
      dot += a[h * width + f] * b[h * width + f];
    dots[h] = dot;
  }
}

/// Runs body(r, scratch) for every row r of `a`, the rows split among the threads by cost;
/// `scratch` is `scratch_size` values of the calling thread's own.
template <typename T, typename Body>
void for_each_row(CsrView<T> a, std::int64_t scratch_size, Body body) {
  if (a.rows == 0) return;
#pragma omp parallel
  {
    std::vector<T> scratch(static_cast<std::size_t>(scratch_size));
    const Range rows =
        balanced_rows(a.row_ptr, a.rows, omp_get_thread_num(), omp_get_num_threads());
    for (std::int64_t r = rows.begin; r < rows.end; ++r)
      body(r, scratch.data());
  }
}

/// e^v: vector_math.hpp's for float (vectorized), libm's for double.
template <typename T> inline T exp_of(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_float(v);
  } else {
    return std::exp(v);
  }
}

/// Prefetches the `bytes` from `row` on: the rows the attention kernels gather (a source's
/// features, an edge's weights) lie at random, and the hardware prefetcher cannot guess them.
inline void prefetch_bytes(const void* row, std::int64_t bytes) {
  constexpr std::int64_t kCacheLine = 64;
  for (std::int64_t byte = 0; byte < bytes; byte += kCacheLine)
    __builtin_prefetch(static_cast<const char*>(row) + byte);
}

/// Edges ahead whose gathered rows are prefetched: at least 8, and about 2 KiB of rows for
/// narrow ones (the SpMM's distances, spmm_kernels.cpp).
inline std::int64_t prefetch_distance(std::int64_t row_bytes) {
  return std::max<std::int64_t>(8, 2048 / std::max<std::int64_t>(row_bytes, 1));
}

/// Sums of per-edge rows taken along weighted_rows' pass: out[r, h] = Σ over row r's edges of
/// in[e, h] (e as weighted_rows' weights). Empty (in.data null) when there are none to take.
template <typename T> struct EdgeSums {
  ConstDenseView<T> in;
  DenseView<T> out;
};

/// What weighted_rows' two paths do at each edge besides the sum itself: prefetch the rows the
/// edge `ahead` on gathers, and add the edge's row of sums.
template <typename T> struct WeightedPass {
  CsrView<T> a;
  const Offset* edge_of; // null: a's own edges
  ConstDenseView<T> alpha;
  ConstDenseView<T> x;
  const EdgeSums<T>& sums;
  std::int64_t row_bytes = x.cols * static_cast<std::int64_t>(sizeof(T));
  std::int64_t ahead = prefetch_distance(row_bytes);
  std::int64_t nnz = a.row_ptr[a.rows];

  /// Row r's sums of per-edge rows zeroed, or null when there are none.
  T* begin_row(std::int64_t r) const {
    if (sums.in.data == nullptr) return nullptr;
    T* sum = sums.out.row(r);
    std::fill(sum, sum + sums.out.cols, T{0});
    return sum;
  }

  /// The row of the weights (and of sums.in) that edge p of `a` reads.
  std::int64_t edge(std::int64_t p) const { return edge_of != nullptr ? edge_of[p] : p; }

  /// The weights' row of edge p of a, after the prefetches and `sum` += its row of sums.
  std::int64_t visit(std::int64_t p, T* sum) const {
    const std::int64_t heads_bytes = alpha.cols * static_cast<std::int64_t>(sizeof(T));
    if (p + ahead < nnz) {
      prefetch_bytes(x.row(a.col[p + ahead]), row_bytes);
      if (edge_of != nullptr) {
        prefetch_bytes(alpha.row(edge_of[p + ahead]), heads_bytes);
        if (sum != nullptr) prefetch_bytes(sums.in.row(edge_of[p + ahead]), heads_bytes);
      }
    }
    const std::int64_t e = edge(p);
    if (sum != nullptr) {
      const T* in = sums.in.row(e);
#pragma omp simd
      for (std::int64_t h = 0; h < sums.in.cols; ++h)
        sum[h] += in[h];
    }
    return e;
  }
};

/// weighted_rows over columns in blocks of B, each block's sums kept in registers across the
/// row's edges (rather than loaded and stored at every edge). W is the width of a head when a
/// block holds B / W whole heads; 0 when a block lies within one head (width a multiple of B).
template <int B, int W, typename T>
void weighted_rows_blocked(CsrView<T> a, const Offset* edge_of, ConstDenseView<T> alpha,
                           ConstDenseView<T> x, DenseView<T> out, const EdgeSums<T>& sums) {
  const std::int64_t width = x.cols / alpha.cols;
  const WeightedPass<T> pass{a, edge_of, alpha, x, sums};
  for_each_row(a, 0, [&](std::int64_t r, T*) {
    const std::int64_t begin = a.row_ptr[r], end = a.row_ptr[r + 1];
    T* sum = pass.begin_row(r);
    for (std::int64_t c0 = 0; c0 < x.cols; c0 += B) {
      T acc[B] = {};
      const std::int64_t h0 = c0 / width;
      for (std::int64_t p = begin; p < end; ++p) {
        // The first block prefetches and sums; the later ones find the rows in cache.
        const std::int64_t e = c0 == 0 ? pass.visit(p, sum) : pass.edge(p);
        const T* w = alpha.row(e) + h0;
        const T* source = x.row(a.col[p]) + c0;
        if constexpr (W == 0) {
#pragma omp simd
          for (int c = 0; c < B; ++c)
            acc[c] += w[0] * source[c];
        } else {
          for (int h = 0; h < B / W; ++h) {
#pragma omp simd
            for (int f = 0; f < W; ++f)
              acc[h * W + f] += w[h] * source[h * W + f];
          }
        }
      }
      std::copy(acc, acc + B, out.row(r) + c0);
    }
  });
}

/// out[r, h·F + f] = Σ over row r's edges p of alpha[e, h] · x[col[p], h·F + f], where e is p
/// (a's own edges) or edge_of[p] (aᵀ's edges, whose weights lie at a's): edge_spmm and the source
/// side of its backward. Common shapes run blocked (weighted_rows_blocked).
template <typename T>
void weighted_rows(CsrView<T> a, const Offset* edge_of, ConstDenseView<T> alpha,
                   ConstDenseView<T> x, DenseView<T> out, const EdgeSums<T>& sums = {}) {
  const std::int64_t heads = alpha.cols;
  const std::int64_t width = heads == 0 ? 0 : x.cols / heads;
  if (heads > 0 && x.cols % 128 == 0) { // whole 512-byte rows, as the SpMM's blocks
    if (width % 128 == 0) return weighted_rows_blocked<128, 0>(a, edge_of, alpha, x, out, sums);
    if (width == 64) return weighted_rows_blocked<128, 64>(a, edge_of, alpha, x, out, sums);
    if (width == 32) return weighted_rows_blocked<128, 32>(a, edge_of, alpha, x, out, sums);
    if (width == 16) return weighted_rows_blocked<128, 16>(a, edge_of, alpha, x, out, sums);
    if (width == 8) return weighted_rows_blocked<128, 8>(a, edge_of, alpha, x, out, sums);
  }
  if (heads > 0 && x.cols % 64 == 0) {
    if (width % 64 == 0) return weighted_rows_blocked<64, 0>(a, edge_of, alpha, x, out, sums);
    if (width == 32) return weighted_rows_blocked<64, 32>(a, edge_of, alpha, x, out, sums);
    if (width == 16) return weighted_rows_blocked<64, 16>(a, edge_of, alpha, x, out, sums);
    if (width == 8) return weighted_rows_blocked<64, 8>(a, edge_of, alpha, x, out, sums);
  }
  if (heads > 0 && x.cols % 16 == 0 && width % 16 == 0) {
    return weighted_rows_blocked<16, 0>(a, edge_of, alpha, x, out, sums);
  }
  const WeightedPass<T> pass{a, edge_of, alpha, x, sums};
  for_each_row(a, 0, [&](std::int64_t r, T*) {
    T* y = out.row(r);
    std::fill(y, y + out.cols, T{0});
    T* sum = pass.begin_row(r);
    for (std::int64_t p = a.row_ptr[r]; p < a.row_ptr[r + 1]; ++p) {
      const std::int64_t e = pass.visit(p, sum);
      const T* source = x.row(a.col[p]);
      for (std::int64_t h = 0; h < heads; ++h) {
        const T w = alpha(e, h);
        T* y_head = y + h * width;
        const T* x_head = source + h * width;
#pragma omp simd
        for (std::int64_t f = 0; f < width; ++f)
          y_head[f] += w * x_head[f];
      }
    }
  });
}

} // namespace

template <typename T>
void edge_softmax(const Backend&, CsrView<T> a, ConstDenseView<T> score_dst,
                  ConstDenseView<T> score_src, T slope, DenseView<T> alpha) {
  const std::int64_t heads = alpha.cols;
  // Each pass runs over the row's edges with the heads innermost: an edge's scores and
  // weights are contiguous, and the heads' exponentials vectorize.
  const std::int64_t score_bytes = heads * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t ahead = prefetch_distance(score_bytes);
  const std::int64_t nnz = a.row_ptr[a.rows];
  for_each_row(a, 2 * heads, [&](std::int64_t r, T* scratch) {
    const std::int64_t begin = a.row_ptr[r], end = a.row_ptr[r + 1];
    if (begin == end) return;
    const T* dst = score_dst.row(r);
    const T negative_slope = slope; // a local: the captured one might alias the stores
    T* largest = scratch;
    T* sum = scratch + heads;
    std::fill(largest, largest + heads, -std::numeric_limits<T>::infinity());
    std::fill(sum, sum + heads, T{0});
    for (std::int64_t p = begin; p < end; ++p) {
      if (p + ahead < nnz) prefetch_bytes(score_src.row(a.col[p + ahead]), score_bytes);
      const T* src = score_src.row(a.col[p]);
      T* e = alpha.row(p);
#pragma omp simd
      for (std::int64_t h = 0; h < heads; ++h) {
        e[h] = leaky(dst[h] + src[h], negative_slope);
        largest[h] = largest[h] < e[h] ? e[h] : largest[h];
      }
    }
    for (std::int64_t p = begin; p < end; ++p) {
      T* w = alpha.row(p);
#pragma omp simd
      for (std::int64_t h = 0; h < heads; ++h) {
        w[h] = exp_of(w[h] - largest[h]);
        sum[h] += w[h];
      }
    }
    for (std::int64_t h = 0; h < heads; ++h)
      sum[h] = T{1} / sum[h];
    for (std::int64_t p = begin; p < end; ++p) {
      T* w = alpha.row(p);
#pragma omp simd
      for (std::int64_t h = 0; h < heads; ++h)
        w[h] *= sum[h];
    }
  });
}

template <typename T>
void edge_spmm(const Backend&, CsrView<T> a, ConstDenseView<T> alpha, ConstDenseView<T> x,
               DenseView<T> out) {
  weighted_rows(a, nullptr, alpha, x, out);
}

template <typename T>
void edge_dropout(const Backend&, CsrView<T> a, ConstDenseView<T> alpha, float prob,
                  const RngKey& key, RowIds rows, DenseView<T> out) {
  const std::int64_t heads = alpha.cols, groups = (heads + 3) / 4;
  const T scale = T{1} / (T{1} - static_cast<T>(prob));
  constexpr int kLanes = RandomLanesAt::kLanes;
  for_each_row(a, 0, [&](std::int64_t r, T*) {
    const std::int64_t begin = a.row_ptr[r], end = a.row_ptr[r + 1];
    const std::int64_t dst = rows(r) * groups;
    // The row's (edge, group of four heads) pairs in edge-major order, 16 Philox calls at a
    // time. A run of pairs covers a contiguous run of the row's [edges, heads] weights.
    std::int64_t edge = begin, group = 0; // the next pair
    std::int64_t lane_row[kLanes];
    std::uint32_t lane_block[kLanes];
    std::uint32_t flat[4 * kLanes];
    while (edge < end) {
      const std::int64_t first = edge * heads + 4 * group; // its first weight's index
      int count = 0;
      for (std::int64_t e = edge, g = group; count < kLanes && e < end; ++count) {
        lane_row[count] = dst + g;
        lane_block[count] = static_cast<std::uint32_t>(rows(a.col[e]));
        if (++g == groups) g = 0, ++e;
      }
      for (int i = count; i < kLanes; ++i) { // spare lanes repeat the last pair
        lane_row[i] = lane_row[count - 1];
        lane_block[i] = lane_block[count - 1];
      }
      const RandomLanesAt bits(key, lane_row, lane_block);
      // Each pair's draws in weight order: head 4g + j takes word j.
      std::int64_t length = 0;
      for (int i = 0; i < count; ++i) {
        const std::int64_t width = std::min<std::int64_t>(4, heads - 4 * group);
        for (std::int64_t j = 0; j < width; ++j)
          flat[length++] = bits.word[j][i];
        if (++group == groups) group = 0, ++edge;
      }
      const T* in = alpha.data + first;
      T* o = out.data + first;
      const float p = prob; // locals: captured ones might alias the stores, keeping it scalar
      const T kept = scale;
#pragma omp simd
      for (std::int64_t k = 0; k < length; ++k)
        o[k] = in[k] * (bits_to_unit_float(flat[k]) >= p ? kept : T{0});
    }
  });
}

template <typename T>
void edge_softmax_backward(const Backend&, CsrView<T> a, ConstDenseView<T> score_dst,
                           ConstDenseView<T> score_src, T slope, ConstDenseView<T> alpha,
                           ConstDenseView<T> weights, ConstDenseView<T> x, ConstDenseView<T> d_out,
                           DenseView<T> d_score_dst, DenseView<T> d_edge) {
  const std::int64_t heads = alpha.cols;
  const std::int64_t width = heads == 0 ? 0 : x.cols / heads;
  const std::int64_t row_bytes = x.cols * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t ahead = prefetch_distance(row_bytes);
  const std::int64_t nnz = a.row_ptr[a.rows];
  for_each_row(a, 2 * heads, [&](std::int64_t r, T* scratch) {
    const std::int64_t begin = a.row_ptr[r], end = a.row_ptr[r + 1];
    const T* dy = d_out.row(r);
    T* weighted = scratch; // Σ weights · d_w over the row, per head
    T* row_sum = scratch + heads;
    std::fill(weighted, weighted + heads, T{0});
    std::fill(row_sum, row_sum + heads, T{0});
    // weights · d_w into d_edge first, d_w a dot product of the row's gradient and the source.
    for (std::int64_t p = begin; p < end; ++p) {
      if (p + ahead < nnz) {
        prefetch_bytes(x.row(a.col[p + ahead]), row_bytes);
        prefetch_bytes(score_src.row(a.col[p + ahead]), heads * sizeof(T)); // for the next pass
      }
      const T* source = x.row(a.col[p]);
      const T* w = weights.row(p);
      T* de = d_edge.row(p);
      head_dots(dy, source, heads, width, de);
#pragma omp simd
      for (std::int64_t h = 0; h < heads; ++h) {
        de[h] *= w[h];
        weighted[h] += de[h];
      }
    }
    const T* dst = score_dst.row(r);
    const T negative_slope = slope; // a local: the captured one might alias the stores
    for (std::int64_t p = begin; p < end; ++p) {
      const T* src = score_src.row(a.col[p]);
      const T* al = alpha.row(p);
      T* de = d_edge.row(p);
#pragma omp simd
      for (std::int64_t h = 0; h < heads; ++h) {
        const T pre = dst[h] + src[h];
        de[h] = (de[h] - al[h] * weighted[h]) * (pre > T{0} ? T{1} : negative_slope);
        row_sum[h] += de[h];
      }
    }
    std::copy(row_sum, row_sum + heads, d_score_dst.row(r));
  });
}

template <typename T>
void edge_spmm_transpose(const Backend&, CsrView<T> at, const Offset* edge_of,
                         ConstDenseView<T> weights, ConstDenseView<T> d_out,
                         ConstDenseView<T> d_edge, DenseView<T> d_x, DenseView<T> d_score_src) {
  // d_score_src's sums run along d_x's: one pass over aᵀ's edges.
  weighted_rows(at, edge_of, weights, d_out, d_x, EdgeSums<T>{d_edge, d_score_src});
}

TESSERA_INSTANTIATE_ATTENTION_KERNELS(float);
TESSERA_INSTANTIATE_ATTENTION_KERNELS(double);

} // namespace tessera::kernels::cpu
