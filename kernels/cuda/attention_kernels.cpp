// CUDA graph attention: the contract of attention_kernels.hpp over the launchers of attention.cu,
// on the backend's stream.
#include "tessera/kernels/attention_kernels.hpp"

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "launch.hpp"

namespace tessera::kernels::cuda {

template <typename T>
void edge_softmax(const Backend& backend, CsrView<T> a, ConstDenseView<T> score_dst,
                  ConstDenseView<T> score_src, T slope, DenseView<T> alpha) {
  if (a.rows == 0 || alpha.cols == 0) return;
  launch::edge_softmax(a.row_ptr, a.col, score_dst.data, score_src.data, slope, alpha.data, a.rows,
                       alpha.cols, as_cuda(backend).stream());
  check_launch("edge_softmax");
}

template <typename T>
void edge_spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> alpha, ConstDenseView<T> x,
               DenseView<T> out) {
  if (a.rows == 0 || out.cols == 0) return;
  launch::edge_spmm(a.row_ptr, a.col, alpha.data, x.data, out.data, a.rows, out.cols, alpha.cols,
                    as_cuda(backend).stream());
  check_launch("edge_spmm");
}

template <typename T>
void edge_dropout(const Backend& backend, CsrView<T> a, ConstDenseView<T> alpha, float prob,
                  const RngKey& key, RowIds rows, DenseView<T> out) {
  if (a.rows == 0 || alpha.cols == 0) return;
  launch::edge_dropout(a.row_ptr, a.col, alpha.data, prob, key, {rows.ids, rows.offset}, out.data,
                       a.rows, alpha.cols, as_cuda(backend).stream());
  check_launch("edge_dropout");
}

template <typename T>
void edge_softmax_backward(const Backend& backend, CsrView<T> a, ConstDenseView<T> score_dst,
                           ConstDenseView<T> score_src, T slope, ConstDenseView<T> alpha,
                           ConstDenseView<T> weights, ConstDenseView<T> x, ConstDenseView<T> d_out,
                           DenseView<T> d_score_dst, DenseView<T> d_edge) {
  if (a.rows == 0 || alpha.cols == 0) return;
  launch::edge_softmax_backward(a.row_ptr, a.col, score_dst.data, score_src.data, slope, alpha.data,
                                weights.data, x.data, d_out.data, d_score_dst.data, d_edge.data,
                                a.rows, d_out.cols, alpha.cols, as_cuda(backend).stream());
  check_launch("edge_softmax_backward");
}

template <typename T>
void edge_spmm_transpose(const Backend& backend, CsrView<T> at, const Offset* edge_of,
                         ConstDenseView<T> weights, ConstDenseView<T> d_out,
                         ConstDenseView<T> d_edge, DenseView<T> d_x, DenseView<T> d_score_src) {
  if (at.rows == 0 || weights.cols == 0) return;
  launch::edge_spmm_transpose(at.row_ptr, at.col, edge_of, weights.data, d_out.data, d_edge.data,
                              d_x.data, d_score_src.data, at.rows, d_x.cols, weights.cols,
                              as_cuda(backend).stream());
  check_launch("edge_spmm_transpose");
}

TESSERA_INSTANTIATE_ATTENTION_KERNELS(float);
TESSERA_INSTANTIATE_ATTENTION_KERNELS(double);

} // namespace tessera::kernels::cuda
