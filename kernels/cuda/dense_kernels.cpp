// CUDA dense kernels: GEMM through cuBLAS (row-major mapped onto column-major), bias gradient
// as a cuBLAS matrix-vector product, and the small kernels of rows.cu.
#include "tessera/kernels/dense_kernels.hpp"

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "cuda_libraries.hpp"
#include "launch.hpp"

#include <type_traits>

namespace tessera::kernels::cuda {

namespace {

cublasOperation_t to_cublas(Transpose t) {
  return t == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

} // namespace

template <typename T>
void gemm(const Backend& backend, Transpose trans_a, Transpose trans_b, T alpha,
          ConstDenseView<T> a, ConstDenseView<T> b, T beta, DenseView<T> c) {
  const auto& be = as_cuda(backend);
  if (c.rows == 0 || c.cols == 0) return;
  const std::int64_t k = trans_a == Transpose::No ? a.cols : a.rows;
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands; each
  // row-major matrix is its column-major transpose with the leading dimension = its columns.
  const auto m = static_cast<int>(c.cols), n = static_cast<int>(c.rows);
  const auto ldb = static_cast<int>(std::max<std::int64_t>(b.cols, 1));
  const auto lda = static_cast<int>(std::max<std::int64_t>(a.cols, 1));
  const auto ldc = static_cast<int>(c.cols);
  if constexpr (std::is_same_v<T, float>) {
    check(cublas().sgemm(be.cublas_handle(), to_cublas(trans_b), to_cublas(trans_a), m, n,
                      static_cast<int>(k), &alpha, b.data, ldb, a.data, lda, &beta, c.data, ldc),
          "cublasSgemm");
  } else {
    check(cublas().dgemm(be.cublas_handle(), to_cublas(trans_b), to_cublas(trans_a), m, n,
                      static_cast<int>(k), &alpha, b.data, ldb, a.data, lda, &beta, c.data, ldc),
          "cublasDgemm");
  }
}

template <typename T> void copy(const Backend& backend, ConstDenseView<T> x, DenseView<T> y) {
  backend.copy_within(y.data, x.data, static_cast<std::size_t>(x.size()) * sizeof(T));
}

void round_to_bf16(const Backend& backend, ConstDenseView<float> x, DenseView<Bf16> y) {
  if (x.size() == 0) return;
  launch::round_to_bf16(x.data, reinterpret_cast<std::uint16_t*>(y.data), x.size(),
                        as_cuda(backend).stream());
  check_launch("round_to_bf16");
}

template <typename T>
void add_bias(const Backend& backend, DenseView<T> x, std::span<const T> bias) {
  if (x.size() == 0) return;
  launch::add_bias(x.data, bias.data(), x.rows, x.cols, as_cuda(backend).stream());
  check_launch("add_bias");
}

template <typename T>
void axpy(const Backend& backend, T alpha, std::span<const T> x, std::span<T> y) {
  if (x.empty()) return;
  launch::axpy(alpha, x.data(), y.data(), static_cast<std::int64_t>(x.size()),
               as_cuda(backend).stream());
  check_launch("axpy");
}

template <typename T>
void bias_grad(const Backend& backend, ConstDenseView<T> dy, std::span<T> d_bias, bool accumulate) {
  const auto& be = as_cuda(backend);
  if (d_bias.empty()) return;
  if (dy.rows == 0) {
    if (!accumulate) be.zero_bytes(d_bias.data(), d_bias.size_bytes());
    return;
  }
  // d_bias (+)= dyᵀ · 1: row-major dy [n, f] is column-major [f, n] with leading dimension f.
  const T one = 1, beta = accumulate ? T{1} : T{0};
  const auto f = static_cast<int>(dy.cols), n = static_cast<int>(dy.rows);
  if constexpr (std::is_same_v<T, float>) {
    check(cublas().sgemv(be.cublas_handle(), CUBLAS_OP_N, f, n, &one, dy.data, f, be.ones_float(dy.rows), 1,
                      &beta, d_bias.data(), 1),
          "cublasSgemv");
  } else {
    check(cublas().dgemv(be.cublas_handle(), CUBLAS_OP_N, f, n, &one, dy.data, f, be.ones_double(dy.rows), 1,
                      &beta, d_bias.data(), 1),
          "cublasDgemv");
  }
}

template <typename T>
void gather_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,
                 DenseView<T> out) {
  if (out.size() == 0) return;
  launch::gather_rows(x.data, rows.data(), out.data, static_cast<std::int64_t>(rows.size()), x.cols,
                      as_cuda(backend).stream());
  check_launch("gather_rows");
}

template <typename T>
void scatter_add_rows(const Backend& backend, ConstDenseView<T> x, std::span<const LocalId> rows,
                      DenseView<T> out) {
  if (x.size() == 0) return;
  launch::scatter_add_rows(x.data, rows.data(), out.data, static_cast<std::int64_t>(rows.size()),
                           x.cols, as_cuda(backend).stream());
  check_launch("scatter_add_rows");
}

TESSERA_INSTANTIATE_DENSE_KERNELS(float);
TESSERA_INSTANTIATE_DENSE_KERNELS(double);

} // namespace tessera::kernels::cuda
