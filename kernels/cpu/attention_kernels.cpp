// OpenMP graph attention: each row's edges scored, softmaxed and summed by the thread that owns
// the row (rows split by cost, as the SpMM), so no sum needs an atomic and every result is the
// same for any thread count. The source side runs over aᵀ's rows for the same reason.
#include "tessera/kernels/attention_kernels.hpp"

#include "parallel.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <omp.h>

namespace tessera::kernels::cpu {
namespace {

template <typename T> inline T leaky(T v, T slope) {
  return v > T{0} ? v : slope * v;
}

/// Runs body(r) for every row r of `a`, the rows split among the threads by cost.
template <typename T, typename Body> void for_each_row(CsrView<T> a, Body body) {
  if (a.rows == 0) return;
#pragma omp parallel
  {
    const Range rows =
        balanced_rows(a.row_ptr, a.rows, omp_get_thread_num(), omp_get_num_threads());
    for (std::int64_t r = rows.begin; r < rows.end; ++r)
      body(r);
  }
}

/// out[r, h·F + f] = Σ over row r's edges p of alpha[e, h] · x[col[p], h·F + f], where e is p
/// (a's own edges) or edge_of[p] (aᵀ's edges, whose weights lie at a's): edge_spmm and the source
/// side of its backward.
template <typename T>
void weighted_rows(CsrView<T> a, const Offset* edge_of, ConstDenseView<T> alpha,
                   ConstDenseView<T> x, DenseView<T> out) {
  const std::int64_t heads = alpha.cols;
  const std::int64_t width = heads == 0 ? 0 : x.cols / heads;
  for_each_row(a, [&](std::int64_t r) {
    T* y = out.row(r);
    std::fill(y, y + out.cols, T{0});
    for (std::int64_t p = a.row_ptr[r]; p < a.row_ptr[r + 1]; ++p) {
      const std::int64_t e = edge_of != nullptr ? edge_of[p] : p;
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
  for_each_row(a, [&](std::int64_t r) {
    const std::int64_t begin = a.row_ptr[r], end = a.row_ptr[r + 1];
    if (begin == end) return;
    const T* dst = score_dst.row(r);
    for (std::int64_t h = 0; h < heads; ++h) {
      T largest = -std::numeric_limits<T>::infinity();
      for (std::int64_t p = begin; p < end; ++p) {
        const T e = leaky(dst[h] + score_src(a.col[p], h), slope);
        alpha(p, h) = e;
        largest = std::max(largest, e);
      }
      T sum = T{0};
      for (std::int64_t p = begin; p < end; ++p) {
        const T w = std::exp(alpha(p, h) - largest);
        alpha(p, h) = w;
        sum += w;
      }
      const T inverse = T{1} / sum;
      for (std::int64_t p = begin; p < end; ++p)
        alpha(p, h) *= inverse;
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
  for_each_row(a, [&](std::int64_t r) {
    const std::int64_t dst = rows(r) * groups;
    for (std::int64_t p = a.row_ptr[r]; p < a.row_ptr[r + 1]; ++p) {
      const auto src = static_cast<std::uint32_t>(rows(a.col[p]));
      for (std::int64_t g = 0; g < groups; ++g) { // one Philox call for four heads
        const std::array<std::uint32_t, 4> bits = random_bits4(key, dst + g, src);
        for (std::int64_t h = 4 * g; h < std::min(heads, 4 * g + 4); ++h) {
          const bool keep = bits_to_unit_float(bits[static_cast<std::size_t>(h - 4 * g)]) >= prob;
          out(p, h) = keep ? alpha(p, h) * scale : T{0};
        }
      }
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
  for_each_row(a, [&](std::int64_t r) {
    const std::int64_t begin = a.row_ptr[r], end = a.row_ptr[r + 1];
    const T* dy = d_out.row(r);
    // weights · d_w into d_edge first, d_w a dot product of the row's gradient and the source.
    for (std::int64_t p = begin; p < end; ++p) {
      const T* source = x.row(a.col[p]);
      for (std::int64_t h = 0; h < heads; ++h) {
        T dot = T{0};
#pragma omp simd reduction(+ : dot)
        for (std::int64_t f = 0; f < width; ++f)
          dot += dy[h * width + f] * source[h * width + f];
        d_edge(p, h) = weights(p, h) * dot;
      }
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      T weighted = T{0}; // Σ weights · d_w over the row
      for (std::int64_t p = begin; p < end; ++p)
        weighted += d_edge(p, h);
      T row_sum = T{0};
      for (std::int64_t p = begin; p < end; ++p) {
        const T pre = score_dst(r, h) + score_src(a.col[p], h);
        const T d_e = (d_edge(p, h) - alpha(p, h) * weighted) * (pre > T{0} ? T{1} : slope);
        d_edge(p, h) = d_e;
        row_sum += d_e;
      }
      d_score_dst(r, h) = row_sum;
    }
  });
}

template <typename T>
void edge_spmm_transpose(const Backend&, CsrView<T> at, const Offset* edge_of,
                         ConstDenseView<T> weights, ConstDenseView<T> d_out,
                         ConstDenseView<T> d_edge, DenseView<T> d_x, DenseView<T> d_score_src) {
  weighted_rows(at, edge_of, weights, d_out, d_x);
  const std::int64_t heads = weights.cols;
  for_each_row(at, [&](std::int64_t j) {
    T* ds = d_score_src.row(j);
    std::fill(ds, ds + heads, T{0});
    for (std::int64_t q = at.row_ptr[j]; q < at.row_ptr[j + 1]; ++q) {
      for (std::int64_t h = 0; h < heads; ++h)
        ds[h] += d_edge(edge_of[q], h);
    }
  });
}

TESSERA_INSTANTIATE_ATTENTION_KERNELS(float);
TESSERA_INSTANTIATE_ATTENTION_KERNELS(double);

} // namespace tessera::kernels::cpu
