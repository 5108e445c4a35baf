// Contract of the graph-attention kernel family (GAT, Veličković et al. 2018): per-edge scores
// from per-node terms, a softmax over each row's edges, a product weighted per edge and head, and
// their backward. One twin per backend.
//
// Layout. `a` is a graph's structure, rows the nodes that attend (destinations, [m]) and columns
// the nodes attended to (sources, [k]); its values are not read. H heads of F features each:
// x and the output are [*, H·F], head h in columns [h·F, (h + 1)·F). Per-edge arrays (alpha,
// d_edge) are [nnz, H] indexed by the edge's position p in a's col (row_ptr[r] <= p <
// row_ptr[r + 1]), so a row slice of `a` reads and writes its own edges' rows.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/op_params.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/tensor.hpp"

// Declared once, expanded into every backend namespace below. Shapes are checked by src/ops.
#define TESSERA_DECLARE_ATTENTION_KERNELS                                                            \
  /* alpha[p, h] = softmax over row i's edges of e[p, h], e[p, h] = leaky(score_dst[i, h] +          \
     score_src[col[p], h]) with leaky(v) = v > 0 ? v : slope·v. score_dst: [m, H]; score_src:       \
     [k, H]; alpha: [nnz, H] written at a's edges. A row without edges writes nothing. */            \
  template <typename T>                                                                              \
  void edge_softmax(const Backend& backend, CsrView<T> a, ConstDenseView<T> score_dst,               \
                    ConstDenseView<T> score_src, T slope, DenseView<T> alpha);                       \
  /* out[i, h·F + f] = Σ over row i's edges p of alpha[p, h] · x[col[p], h·F + f]. x: [k, H·F]; \
     out: [m, H·F] overwritten (0 for a row without edges); H = alpha.cols. */                      \
  template <typename T>                                                                              \
  void edge_spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> alpha,                      \
                 ConstDenseView<T> x, DenseView<T> out);                                             \
  /* Attention dropout: out[p, h] = alpha[p, h] · keep / (1 − prob) for edge p of row i, keep =   \
     unit(random_bits4(key, rows(i)·⌈H/4⌉ + h/4, rows(col[p]))[h mod 4]) >= prob: keyed by the  \
     global ids of both ends (rows maps a's rows and columns, which share their first rows, to       \
     global ids), so every tiling drops the same edges; one Philox call serves four heads. out       \
     may alias alpha. */                                                                             \
  template <typename T>                                                                              \
  void edge_dropout(const Backend& backend, CsrView<T> a, ConstDenseView<T> alpha, float prob,       \
                    const RngKey& key, RowIds rows, DenseView<T> out);                               \
  /* The destination side of the backward of edge_spmm(weights, x) with weights = alpha, or          \
     edge_dropout(alpha) (weights = alpha · keep / (1 − prob)), given d_out [m, H·F]:            \
     d_w[p, h] = Σ_f d_out[i, h·F + f] · x[col[p], h·F + f];                                     \
     d_edge[p, h] = (weights[p, h] · d_w[p, h] − alpha[p, h] · Σ over row i's edges q of        \
       weights[q, h] · d_w[q, h]) · leaky'(score_dst[i, h] + score_src[col[p], h]), written at a's \
       edges (the gradient at e[p, h]; without dropout alpha · (d_w − Σ alpha · d_w));          \
     d_score_dst[i, h] = Σ over row i's edges of d_edge[p, h], overwritten ([m, H]). */             \
  template <typename T>                                                                              \
  void edge_softmax_backward(const Backend& backend, CsrView<T> a, ConstDenseView<T> score_dst,      \
                             ConstDenseView<T> score_src, T slope, ConstDenseView<T> alpha,          \
                             ConstDenseView<T> weights, ConstDenseView<T> x,                         \
                             ConstDenseView<T> d_out, DenseView<T> d_score_dst,                      \
                             DenseView<T> d_edge);                                                   \
  /* The source side, through at = aᵀ ([k, m], its values unread) whose edge q is edge             \
     edge_of[q] of a, for the weights edge_spmm used: d_x[j, h·F + f] = Σ over row j's edges q of  \
     at of weights[edge_of[q], h] · d_out[col_t[q], h·F + f]; d_score_src[j, h] = Σ of            \
     d_edge[edge_of[q], h]. Both [k, ·], overwritten. No atomics: the sums run over at's rows, in   \
     their order. */                                                                                 \
  template <typename T>                                                                              \
  void edge_spmm_transpose(const Backend& backend, CsrView<T> at, const Offset* edge_of,             \
                           ConstDenseView<T> weights, ConstDenseView<T> d_out,                       \
                           ConstDenseView<T> d_edge, DenseView<T> d_x, DenseView<T> d_score_src);

/// Explicit instantiation of the family for value type T, used by every backend's source.
#define TESSERA_INSTANTIATE_ATTENTION_KERNELS(T)                                                   \
  template void edge_softmax<T>(const Backend&, CsrView<T>, ConstDenseView<T>, ConstDenseView<T>,  \
                                T, DenseView<T>);                                                  \
  template void edge_spmm<T>(const Backend&, CsrView<T>, ConstDenseView<T>, ConstDenseView<T>,     \
                             DenseView<T>);                                                        \
  template void edge_dropout<T>(const Backend&, CsrView<T>, ConstDenseView<T>, float,              \
                                const RngKey&, RowIds, DenseView<T>);                              \
  template void edge_softmax_backward<T>(                                                          \
      const Backend&, CsrView<T>, ConstDenseView<T>, ConstDenseView<T>, T, ConstDenseView<T>,      \
      ConstDenseView<T>, ConstDenseView<T>, ConstDenseView<T>, DenseView<T>, DenseView<T>);        \
  template void edge_spmm_transpose<T>(const Backend&, CsrView<T>, const Offset*,                  \
                                       ConstDenseView<T>, ConstDenseView<T>, ConstDenseView<T>,    \
                                       DenseView<T>, DenseView<T>)

namespace tessera::kernels {
namespace cpu {
TESSERA_DECLARE_ATTENTION_KERNELS
} // namespace cpu
namespace cuda {
TESSERA_DECLARE_ATTENTION_KERNELS
} // namespace cuda
} // namespace tessera::kernels

#undef TESSERA_DECLARE_ATTENTION_KERNELS
