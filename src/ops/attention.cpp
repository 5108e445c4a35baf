// Dispatch of the graph-attention ops (GAT) to the backend's kernels, after their shape checks.
#include "checks.hpp"
#include "tessera/kernels/attention_kernels.hpp"
#include "tessera/ops/ops.hpp"

#include <string>

namespace tessera::ops {

namespace {

[[noreturn]] void refuse(const char* op, const std::string& why) {
  throw DimensionMismatch(std::string(op) + ": " + why);
}

/// The shapes every attention op shares: a: [m, k]; H = heads >= 1; the per-node scores
/// dst: [m, H] and src: [k, H]; per-edge arrays [nnz, H] (their rows checked against a's edges
/// where a lies in host memory).
template <typename T>
void check_scores(const char* op, CsrView<T> a, std::int64_t heads, ConstDenseView<T> dst,
                  ConstDenseView<T> src) {
  if (heads < 1) refuse(op, "expected at least one head (per-edge arrays of >= 1 column)");
  if (dst.rows != a.rows || dst.cols != heads) {
    detail::throw_mismatch(op, "score_dst of shape [A.rows, heads]", "A", detail::shape(a),
                           "score_dst", detail::shape(dst));
  }
  if (src.rows != a.cols || src.cols != heads) {
    detail::throw_mismatch(op, "score_src of shape [A.cols, heads]", "A", detail::shape(a),
                           "score_src", detail::shape(src));
  }
}

template <typename T>
void check_edges(const char* op, const Backend& backend, CsrView<T> a, ConstDenseView<T> edges,
                 const char* name) {
  // A's row pointers are readable here only in host memory: on a GPU the caller sizes the
  // per-edge arrays from the matrix it built (CsrT::nnz()).
  if (backend.kind() != DeviceKind::Cpu || a.rows == 0) return;
  if (edges.rows < a.row_ptr[a.rows]) {
    detail::throw_mismatch(op, "a row per edge of A", "A's edges",
                           shape_string(a.row_ptr[a.rows], edges.cols), name, detail::shape(edges));
  }
}

/// The rows summed (`in`, read at A's columns: [A.cols, heads · F]) and those written (`out`,
/// [A.rows, in.cols]), named as the op calls them.
template <typename T>
void check_features(const char* op, CsrView<T> a, std::int64_t heads, ConstDenseView<T> in,
                    const char* in_name, ConstDenseView<T> out, const char* out_name) {
  if (in.rows != a.cols || in.cols % heads != 0) {
    detail::throw_mismatch(op, "rows summed of shape [A.cols, heads · F]", "A", detail::shape(a),
                           in_name, detail::shape(in));
  }
  if (out.rows != a.rows || out.cols != in.cols) {
    detail::throw_mismatch(op, "rows written of shape [A.rows, heads · F]", in_name,
                           detail::shape(in), out_name, detail::shape(out));
  }
}

} // namespace

template <typename T>
void edge_softmax(const Backend& backend, CsrView<T> a, ConstDenseView<T> score_dst,
                  ConstDenseView<T> score_src, T slope, DenseView<T> alpha) {
  check_scores("edge_softmax", a, alpha.cols, score_dst, score_src);
  check_edges<T>("edge_softmax", backend, a, alpha, "alpha");
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::edge_softmax(backend, a, score_dst, score_src, slope, alpha);
  case DeviceKind::Cuda:
    return kernels::cuda::edge_softmax(backend, a, score_dst, score_src, slope, alpha);
  }
}

template <typename T>
void edge_spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> alpha, ConstDenseView<T> x,
               DenseView<T> out) {
  if (alpha.cols < 1) refuse("edge_spmm", "expected at least one head (alpha of >= 1 column)");
  check_edges("edge_spmm", backend, a, alpha, "alpha");
  check_features<T>("edge_spmm", a, alpha.cols, x, "x", out, "out");
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::edge_spmm(backend, a, alpha, x, out);
  case DeviceKind::Cuda:
    return kernels::cuda::edge_spmm(backend, a, alpha, x, out);
  }
}

template <typename T>
void edge_dropout(const Backend& backend, CsrView<T> a, ConstDenseView<T> alpha, float prob,
                  const RngKey& key, RowIds rows, DenseView<T> out) {
  const char* op = "edge_dropout";
  detail::check_probability(op, prob);
  if (alpha.cols < 1) refuse(op, "expected at least one head (alpha of >= 1 column)");
  check_edges(op, backend, a, alpha, "alpha");
  if (out.rows != alpha.rows || out.cols != alpha.cols) {
    detail::throw_mismatch(op, "out of alpha's shape", "alpha", detail::shape(alpha), "out",
                           detail::shape(out));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::edge_dropout(backend, a, alpha, prob, key, rows, out);
  case DeviceKind::Cuda:
    return kernels::cuda::edge_dropout(backend, a, alpha, prob, key, rows, out);
  }
}

template <typename T>
void edge_softmax_backward(const Backend& backend, CsrView<T> a, ConstDenseView<T> score_dst,
                           ConstDenseView<T> score_src, T slope, ConstDenseView<T> alpha,
                           ConstDenseView<T> weights, ConstDenseView<T> x, ConstDenseView<T> d_out,
                           DenseView<T> d_score_dst, DenseView<T> d_edge) {
  const char* op = "edge_softmax_backward";
  check_scores(op, a, alpha.cols, score_dst, score_src);
  check_edges(op, backend, a, alpha, "alpha");
  check_edges<T>(op, backend, a, d_edge, "d_edge");
  check_features(op, a, alpha.cols, x, "x", d_out, "d_out");
  if (d_edge.cols != alpha.cols) {
    detail::throw_mismatch(op, "d_edge of alpha's shape", "alpha", detail::shape(alpha), "d_edge",
                           detail::shape(d_edge));
  }
  if (weights.rows != alpha.rows || weights.cols != alpha.cols) {
    detail::throw_mismatch(op, "weights of alpha's shape", "alpha", detail::shape(alpha), "weights",
                           detail::shape(weights));
  }
  if (d_score_dst.rows != a.rows || d_score_dst.cols != alpha.cols) {
    detail::throw_mismatch(op, "d_score_dst of score_dst's shape", "score_dst",
                           detail::shape(score_dst), "d_score_dst", detail::shape(d_score_dst));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::edge_softmax_backward(backend, a, score_dst, score_src, slope, alpha,
                                               weights, x, d_out, d_score_dst, d_edge);
  case DeviceKind::Cuda:
    return kernels::cuda::edge_softmax_backward(backend, a, score_dst, score_src, slope, alpha,
                                                weights, x, d_out, d_score_dst, d_edge);
  }
}

template <typename T>
void edge_spmm_transpose(const Backend& backend, CsrView<T> at, const Offset* edge_of,
                         ConstDenseView<T> weights, ConstDenseView<T> d_out,
                         ConstDenseView<T> d_edge, DenseView<T> d_x, DenseView<T> d_score_src) {
  const ConstDenseView<T> alpha = weights; // shaped as alpha
  const char* op = "edge_spmm_transpose";
  if (alpha.cols < 1) refuse(op, "expected at least one head (alpha of >= 1 column)");
  if (d_edge.rows != alpha.rows || d_edge.cols != alpha.cols) {
    detail::throw_mismatch(op, "d_edge of alpha's shape", "alpha", detail::shape(alpha), "d_edge",
                           detail::shape(d_edge));
  }
  check_features<T>(op, at, alpha.cols, d_out, "d_out", d_x, "d_x");
  if (d_score_src.rows != at.rows || d_score_src.cols != alpha.cols) {
    detail::throw_mismatch(op, "d_score_src of shape [Aᵀ.rows, heads]", "Aᵀ", detail::shape(at),
                           "d_score_src", detail::shape(d_score_src));
  }
  switch (backend.kind()) {
  case DeviceKind::Cpu:
    return kernels::cpu::edge_spmm_transpose(backend, at, edge_of, alpha, d_out, d_edge, d_x,
                                             d_score_src);
  case DeviceKind::Cuda:
    return kernels::cuda::edge_spmm_transpose(backend, at, edge_of, alpha, d_out, d_edge, d_x,
                                              d_score_src);
  }
}

// The ops have the kernels' signatures: the family's instantiation macro serves both.
TESSERA_INSTANTIATE_ATTENTION_KERNELS(float);
TESSERA_INSTANTIATE_ATTENTION_KERNELS(double);

} // namespace tessera::ops
