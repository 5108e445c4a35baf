// Every CUDA kernel against the CPU reference on random data with odd sizes, empty rows and
// widths that are not multiples of 32; dropout masks must be bit-identical to the CPU's.
// Skipped (with the reason) where there is no GPU.
#include "cuda/cuda_test_util.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <tessera/tessera.hpp>
#include <vector>

namespace tessera::testing {
namespace {

template <typename T> class CudaKernels : public CudaTest {};
TYPED_TEST_SUITE(CudaKernels, ValueTypes);

/// Expects the device result `got` within tolerance of the host result `ref`.
template <typename T> void expect_matches(const DenseT<T>& ref, const DenseT<T>& got_host) {
  ASSERT_EQ(ref.rows(), got_host.rows());
  ASSERT_EQ(ref.cols(), got_host.cols());
  expect_all_near(as_doubles(ref.data(), ref.size()), got_host.data(), got_host.size());
}

template <typename T> void expect_identical(const DenseT<T>& ref, const DenseT<T>& got_host) {
  ASSERT_EQ(ref.size(), got_host.size());
  for (std::int64_t i = 0; i < ref.size(); ++i)
    ASSERT_EQ(ref.data()[i], got_host.data()[i]) << "element " << i;
}

TYPED_TEST(CudaKernels, GemmIsEquivalentToRef) {
  using T = TypeParam;
  for (const auto& [ta, tb] : {std::pair{Transpose::No, Transpose::No},
                               {Transpose::Yes, Transpose::No},
                               {Transpose::No, Transpose::Yes},
                               {Transpose::Yes, Transpose::Yes}}) {
    const std::int64_t m = 37, k = 29, n = 45;
    const auto a =
        random_dense<T>(this->cpu, ta == Transpose::No ? m : k, ta == Transpose::No ? k : m, 1);
    const auto b =
        random_dense<T>(this->cpu, tb == Transpose::No ? k : n, tb == Transpose::No ? n : k, 2);
    auto c = random_dense<T>(this->cpu, m, n, 3);
    auto c_gpu = this->up(c);

    ops::gemm(*this->cpu, ta, tb, T{0.5}, a.cview(), b.cview(), T{2}, c.view());
    ops::gemm(*this->gpu, ta, tb, T{0.5}, this->up(a).cview(), this->up(b).cview(), T{2},
              c_gpu.view());

    expect_matches(c, this->down(c_gpu));
  }
}

TYPED_TEST(CudaKernels, BiasAxpyAndBiasGradAreEquivalentToRef) {
  using T = TypeParam;
  const auto dy = random_dense<T>(this->cpu, 301, 47, 4);
  const auto bias = random_dense<T>(this->cpu, 1, 47, 5);
  auto x = random_dense<T>(this->cpu, 301, 47, 6);
  auto x_gpu = this->up(x);
  const auto bias_gpu = this->up(bias);
  auto grad = random_dense<T>(this->cpu, 1, 47, 7);
  auto grad_gpu = this->up(grad);
  const auto span = [](auto& m) { return std::span(m.data(), static_cast<std::size_t>(m.size())); };

  ops::add_bias(*this->cpu, x.view(), std::span<const T>(span(bias)));
  ops::add_bias(*this->gpu, x_gpu.view(), std::span<const T>(span(bias_gpu)));
  ops::axpy(*this->cpu, T{-1.5}, std::span<const T>(span(dy)), span(x));
  const auto dy_gpu = this->up(dy);
  ops::axpy(*this->gpu, T{-1.5}, std::span<const T>(dy_gpu.data(), 301 * 47), span(x_gpu));
  for (const bool accumulate : {true, false}) {
    ops::bias_grad(*this->cpu, dy.cview(), span(grad), accumulate);
    ops::bias_grad(*this->gpu, dy_gpu.cview(), span(grad_gpu), accumulate);
  }

  expect_matches(x, this->down(x_gpu));
  expect_matches(grad, this->down(grad_gpu));
}

TYPED_TEST(CudaKernels, GatherAndScatterAddRowsAreEquivalentToRef) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->cpu, 50, 33, 8);
  const std::vector<LocalId> rows = {49, 0, 17, 3, 28};
  const auto rows_gpu = this->up(rows);
  DenseT<T> packed(this->cpu, 5, 33);
  DenseT<T> packed_gpu(this->gpu, 5, 33);
  auto out = random_dense<T>(this->cpu, 50, 33, 9);
  auto out_gpu = this->up(out);

  ops::gather_rows(*this->cpu, x.cview(), std::span<const LocalId>(rows), packed.view());
  ops::gather_rows(*this->gpu, this->up(x).cview(), rows_gpu.span(), packed_gpu.view());
  ops::scatter_add_rows(*this->cpu, packed.cview(), std::span<const LocalId>(rows), out.view());
  ops::scatter_add_rows(*this->gpu, packed_gpu.cview(), rows_gpu.span(), out_gpu.view());

  expect_identical(packed, this->down(packed_gpu));
  expect_matches(out, this->down(out_gpu));
}

TYPED_TEST(CudaKernels, SpmmIsEquivalentToRef) {
  using T = TypeParam;
  for (const std::int64_t width : {1, 7, 33, 64, 129}) {
    const auto a = random_csr<T>(this->cpu, 211, 150, 0.05, 10 + width, 4); // every 4th row empty
    const auto b = random_dense<T>(this->cpu, 150, width, 11);
    DenseT<T> c(this->cpu, 211, width);
    DenseT<T> c_gpu(this->gpu, 211, width);
    const auto a_gpu = this->up(a);
    const auto b_gpu = this->up(b);

    ops::spmm(*this->cpu, a.view(), b.cview(), c.view());
    for (int call = 0; call < 2; ++call) // the second call reuses the cached plan
      ops::spmm(*this->gpu, a_gpu.view(), b_gpu.cview(), c_gpu.view());

    SCOPED_TRACE("width " + std::to_string(width));
    expect_matches(c, this->down(c_gpu));
  }
}

TYPED_TEST(CudaKernels, GraphAttentionForwardAndBackwardAreEquivalentToTheCpus) {
  using T = TypeParam;
  constexpr std::int64_t heads = 3, width = 5;
  const T slope = T(0.2);
  const auto a = random_csr<T>(this->cpu, 211, 150, 0.05, 30, 4); // every 4th row empty
  // aᵀ's structure and, per edge of it, the edge of a it is.
  std::vector<std::vector<std::pair<LocalId, T>>> rows(150);
  std::vector<std::vector<Offset>> edges(150);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset p = a.row_ptr()[r]; p < a.row_ptr()[r + 1]; ++p) {
      rows[a.col()[p]].emplace_back(static_cast<LocalId>(r), T(1));
      edges[a.col()[p]].push_back(p);
    }
  }
  const auto at = make_csr<T>(this->cpu, a.rows(), rows);
  std::vector<Offset> edge_of;
  for (const auto& list : edges)
    edge_of.insert(edge_of.end(), list.begin(), list.end());
  const Buffer<Offset> edge_of_gpu = this->up(edge_of);
  const auto dst = random_dense<T>(this->cpu, 211, heads, 31);
  const auto src = random_dense<T>(this->cpu, 150, heads, 32);
  const auto x = random_dense<T>(this->cpu, 150, heads * width, 33);
  const auto d_out = random_dense<T>(this->cpu, 211, heads * width, 34);
  const std::int64_t nnz = a.nnz();
  DenseT<T> alpha(this->cpu, nnz, heads), out(this->cpu, 211, heads * width);
  DenseT<T> d_edge(this->cpu, nnz, heads), d_dst(this->cpu, 211, heads);
  DenseT<T> d_x(this->cpu, 150, heads * width), d_src(this->cpu, 150, heads);
  DenseT<T> alpha_gpu(this->gpu, nnz, heads), out_gpu(this->gpu, 211, heads * width);
  DenseT<T> d_edge_gpu(this->gpu, nnz, heads), d_dst_gpu(this->gpu, 211, heads);
  DenseT<T> d_x_gpu(this->gpu, 150, heads * width), d_src_gpu(this->gpu, 150, heads);
  const auto a_gpu = this->up(a), at_gpu = this->up(at);
  const auto dst_gpu = this->up(dst), src_gpu = this->up(src), x_gpu = this->up(x);
  const auto d_out_gpu = this->up(d_out);

  ops::edge_softmax(*this->cpu, a.view(), dst.cview(), src.cview(), slope, alpha.view());
  ops::edge_spmm(*this->cpu, a.view(), alpha.cview(), x.cview(), out.view());
  const RngKey key = RngKey::make(3, RngPurpose::AttentionDropout, 1, 2);
  DenseT<T> weights(this->cpu, nnz, heads), weights_gpu(this->gpu, nnz, heads);
  ops::edge_dropout(*this->cpu, a.view(), alpha.cview(), 0.3f, key, RowIds{nullptr, 7},
                    weights.view());
  ops::edge_softmax_backward(*this->cpu, a.view(), dst.cview(), src.cview(), slope, alpha.cview(),
                             weights.cview(), x.cview(), d_out.cview(), d_dst.view(),
                             d_edge.view());
  ops::edge_spmm_transpose(*this->cpu, at.view(), edge_of.data(), weights.cview(), d_out.cview(),
                           d_edge.cview(), d_x.view(), d_src.view());
  ops::edge_softmax(*this->gpu, a_gpu.view(), dst_gpu.cview(), src_gpu.cview(), slope,
                    alpha_gpu.view());
  ops::edge_spmm(*this->gpu, a_gpu.view(), alpha_gpu.cview(), x_gpu.cview(), out_gpu.view());
  ops::edge_dropout(*this->gpu, a_gpu.view(), alpha_gpu.cview(), 0.3f, key, RowIds{nullptr, 7},
                    weights_gpu.view());
  ops::edge_softmax_backward(*this->gpu, a_gpu.view(), dst_gpu.cview(), src_gpu.cview(), slope,
                             alpha_gpu.cview(), weights_gpu.cview(), x_gpu.cview(),
                             d_out_gpu.cview(), d_dst_gpu.view(), d_edge_gpu.view());
  ops::edge_spmm_transpose(*this->gpu, at_gpu.view(), edge_of_gpu.data(), weights_gpu.cview(),
                           d_out_gpu.cview(), d_edge_gpu.cview(), d_x_gpu.view(), d_src_gpu.view());

  expect_matches(alpha, this->down(alpha_gpu));
  expect_matches(weights, this->down(weights_gpu));
  expect_matches(out, this->down(out_gpu));
  expect_matches(d_edge, this->down(d_edge_gpu));
  expect_matches(d_dst, this->down(d_dst_gpu));
  expect_matches(d_x, this->down(d_x_gpu));
  expect_matches(d_src, this->down(d_src_gpu));
}

TEST_F(CudaTest, Bf16RoundingAndDropoutAreTheCpusBitForBitAndItsSpmmMatchesTheCpus) {
  for (const std::int64_t width : {1, 33, 128, 129}) {
    SCOPED_TRACE("width " + std::to_string(width));
    const auto a = random_csr<float>(cpu, 211, 150, 0.05, 20 + width, 4); // every 4th row empty
    const auto x = random_dense<float>(cpu, 150, width, 21);
    DenseT<Bf16> x16(cpu, 150, width), x16_gpu(gpu, 150, width);
    ops::round_to_bf16(*cpu, x.cview(), x16.view());
    ops::round_to_bf16(*gpu, up(x).cview(), x16_gpu.view());
    std::vector<Bf16> back(static_cast<std::size_t>(x16.size()));
    gpu->copy_to_host(back.data(), x16_gpu.data(), x16_gpu.bytes());
    for (std::int64_t i = 0; i < x16.size(); ++i)
      ASSERT_EQ(back[static_cast<std::size_t>(i)].bits, x16.data()[i].bits) << "element " << i;

    // Dropout fused with the rounding: the CPU's mask and bits.
    const RngKey key = RngKey::make(5, RngPurpose::Dropout, 0, 2);
    ops::dropout_to_bf16(*cpu, x.cview(), x16.view(), 0.5f, key, RowIds{nullptr, 3});
    ops::dropout_to_bf16(*gpu, up(x).cview(), x16_gpu.view(), 0.5f, key, RowIds{nullptr, 3});
    gpu->copy_to_host(back.data(), x16_gpu.data(), x16_gpu.bytes());
    for (std::int64_t i = 0; i < x16.size(); ++i)
      ASSERT_EQ(back[static_cast<std::size_t>(i)].bits, x16.data()[i].bits) << "dropped " << i;

    DenseT<float> c(cpu, 211, width), c_gpu(gpu, 211, width);
    ops::spmm_bf16(*cpu, a.view(), x16.cview(), c.view());
    ops::spmm_bf16(*gpu, up(a).view(), x16_gpu.cview(), c_gpu.view());

    expect_matches(c, down(c_gpu));
  }
}

TYPED_TEST(CudaKernels, SpmmOfARowSliceIsEquivalentToRef) {
  using T = TypeParam;
  const auto a = random_csr<T>(this->cpu, 120, 80, 0.1, 12, 5);
  const auto b = random_dense<T>(this->cpu, 80, 19, 13);
  DenseT<T> c(this->cpu, 70, 19);
  DenseT<T> c_gpu(this->gpu, 70, 19);
  const auto a_gpu = this->up(a);

  ops::spmm(*this->cpu, a.view().row_slice(50, 120), b.cview(), c.view());
  ops::spmm(*this->gpu, a_gpu.view().row_slice(50, 120), this->up(b).cview(), c_gpu.view());

  expect_matches(c, this->down(c_gpu));
}

TYPED_TEST(CudaKernels, SpmmTransposeIsEquivalentToRefAfterTheValuesChange) {
  using T = TypeParam;
  const auto a = random_csr<T>(this->cpu, 173, 61, 0.08, 14, 6);
  const auto b = random_dense<T>(this->cpu, 173, 35, 15);
  auto a_gpu = this->up(a);
  const auto b_gpu = this->up(b);
  DenseT<T> c(this->cpu, 61, 35);
  DenseT<T> c_gpu(this->gpu, 61, 35);

  for (int round = 0; round < 2; ++round) {
    // The plan keeps Aᵀ's structure; values are read from A on every call.
    CsrT<T> scaled = a.template cast<T>();
    for (std::int64_t k = 0; k < scaled.nnz(); ++k)
      scaled.val()[k] *= static_cast<T>(round + 1);
    copy_bytes(*this->gpu, a_gpu.val(), *this->cpu, scaled.val(), scaled.nnz() * sizeof(T));
    ops::spmm_transpose(*this->cpu, scaled.view(), b.cview(), c.view());
    ops::spmm_transpose(*this->gpu, a_gpu.view(), b_gpu.cview(), c_gpu.view());

    SCOPED_TRACE("round " + std::to_string(round));
    expect_matches(c, this->down(c_gpu));
  }
}

TYPED_TEST(CudaKernels, ReluIsEquivalentToRef) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->cpu, 97, 31, 16);
  const auto dy = random_dense<T>(this->cpu, 97, 31, 17);
  DenseT<T> y(this->cpu, 97, 31), dx(this->cpu, 97, 31);
  DenseT<T> y_gpu(this->gpu, 97, 31), dx_gpu(this->gpu, 97, 31);

  ops::relu_forward(*this->cpu, x.cview(), y.view());
  ops::relu_forward(*this->gpu, this->up(x).cview(), y_gpu.view());
  ops::relu_backward(*this->cpu, y.cview(), dy.cview(), dx.view());
  ops::relu_backward(*this->gpu, y_gpu.cview(), this->up(dy).cview(), dx_gpu.view());

  expect_identical(y, this->down(y_gpu));
  expect_identical(dx, this->down(dx_gpu));
}

TYPED_TEST(CudaKernels, EluAndGeluMatchTheCpu) {
  using T = TypeParam;
  auto x = random_dense<T>(this->cpu, 97, 31, 26);
  for (std::int64_t i = 0; i < x.size(); ++i) // both branches, and GELU's tails
    x.data()[i] *= T{6};
  const auto dy = random_dense<T>(this->cpu, 97, 31, 27);
  DenseT<T> y(this->cpu, 97, 31), dx(this->cpu, 97, 31);
  DenseT<T> y_gpu(this->gpu, 97, 31), dx_gpu(this->gpu, 97, 31);
  const auto x_gpu = this->up(x);
  const auto dy_gpu = this->up(dy);

  ops::elu_forward(*this->cpu, x.cview(), y.view());
  ops::elu_forward(*this->gpu, x_gpu.cview(), y_gpu.view());
  expect_matches(y, this->down(y_gpu));
  for (const T y_scale : {T{1}, T(0.4)}) { // 0.4: the output of a dropout with p = 0.6
    SCOPED_TRACE(::testing::Message() << "y_scale " << y_scale);
    ops::elu_backward(*this->cpu, y.cview(), dy.cview(), dx.view(), y_scale);
    ops::elu_backward(*this->gpu, y_gpu.cview(), dy_gpu.cview(), dx_gpu.view(), y_scale);
    expect_matches(dx, this->down(dx_gpu));
  }
  ops::gelu_forward(*this->cpu, x.cview(), y.view());
  ops::gelu_forward(*this->gpu, x_gpu.cview(), y_gpu.view());
  expect_matches(y, this->down(y_gpu));
  ops::gelu_backward(*this->cpu, x.cview(), dy.cview(), dx.view());
  ops::gelu_backward(*this->gpu, x_gpu.cview(), dy_gpu.cview(), dx_gpu.view());
  expect_matches(dx, this->down(dx_gpu));
}

TYPED_TEST(CudaKernels, DropoutMasksAreBitIdenticalToTheCpu) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->cpu, 83, 70, 18); // 70: not a multiple of 4 or 32
  const std::vector<GlobalId> ids = [] {
    std::vector<GlobalId> v(83);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = 1000003 * static_cast<GlobalId>(i) + 5;
    return v;
  }();
  const auto ids_gpu = this->up(ids);
  const RngKey key = RngKey::make(42, RngPurpose::Dropout, 1, 7);
  DenseT<T> y(this->cpu, 83, 70), y_gpu(this->gpu, 83, 70);
  DenseT<T> z(this->cpu, 83, 70), z_gpu(this->gpu, 83, 70);

  ops::dropout_forward(*this->cpu, x.cview(), y.view(), 0.3f, key, RowIds{ids.data(), 0});
  ops::dropout_forward(*this->gpu, this->up(x).cview(), y_gpu.view(), 0.3f, key,
                       RowIds{ids_gpu.data(), 0});
  ops::relu_dropout_forward(*this->cpu, x.cview(), z.view(), 0.5f, key, RowIds{nullptr, 11});
  ops::relu_dropout_forward(*this->gpu, this->up(x).cview(), z_gpu.view(), 0.5f, key,
                            RowIds{nullptr, 11});

  expect_identical(y, this->down(y_gpu));
  expect_identical(z, this->down(z_gpu));
}

TYPED_TEST(CudaKernels, BiasActivationIsBitIdenticalToTheCpu) {
  using T = TypeParam;
  const auto x = random_dense<T>(this->cpu, 83, 70, 21);
  const auto bias = random_dense<T>(this->cpu, 1, 70, 22);
  const auto bias_gpu = this->up(bias);
  const RngKey key = RngKey::make(42, RngPurpose::Dropout, 2, 7);
  const std::span<const T> b(bias.data(), 70), b_gpu(bias_gpu.data(), 70);
  for (const float p : {0.0f, 0.5f}) {
    for (const bool relu : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << (relu ? ", relu" : ""));
      DenseT<T> y = to_backend(x, this->cpu), y_gpu = this->up(x);
      ops::bias_activation(*this->cpu, y.view(), b, p, key, RowIds{nullptr, 11}, relu);
      ops::bias_activation(*this->gpu, y_gpu.view(), b_gpu, p, key, RowIds{nullptr, 11}, relu);
      expect_identical(y, this->down(y_gpu));
    }
  }
}

TYPED_TEST(CudaKernels, DropoutOnSparseValuesIsBitIdenticalToTheCpu) {
  using T = TypeParam;
  const auto a = random_csr<T>(this->cpu, 64, 90, 0.2, 19, 3);
  const auto a_gpu = this->up(a);
  const RngKey key = RngKey::make(3, RngPurpose::Dropout, 0, 2);
  std::vector<T> out(static_cast<std::size_t>(a.nnz()));
  Buffer<T> out_gpu(this->gpu, a.nnz());

  ops::dropout_csr_values(*this->cpu, a.view(), std::span<T>(out), 0.5f, key, RowIds{});
  ops::dropout_csr_values(*this->gpu, a_gpu.view(), out_gpu.span(), 0.5f, key, RowIds{});

  EXPECT_EQ(this->down(out_gpu), out);
}

TYPED_TEST(CudaKernels, SoftmaxCrossEntropyAndAccuracyAreEquivalentToRef) {
  using T = TypeParam;
  const auto logits = random_dense<T>(this->cpu, 200, 7, 20);
  std::vector<std::int32_t> labels(200);
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>((i * 5) % 7);
  const std::vector<std::int32_t> rows = {0, 3, 17, 42, 99, 150, 199};
  const auto logits_gpu = this->up(logits);
  const auto labels_gpu = this->up(labels);
  const auto rows_gpu = this->up(rows);
  DenseT<T> grad(this->cpu, 200, 7), grad_gpu(this->gpu, 200, 7);

  const double loss =
      ops::softmax_cross_entropy<T>(*this->cpu, logits.cview(), labels, rows, 140.0, grad.view());
  const double loss_gpu = ops::softmax_cross_entropy<T>(
      *this->gpu, logits_gpu.cview(), labels_gpu.span(), rows_gpu.span(), 140.0, grad_gpu.view());
  const std::int64_t correct = ops::count_correct<T>(*this->cpu, logits.cview(), labels, rows);
  const std::int64_t correct_gpu =
      ops::count_correct<T>(*this->gpu, logits_gpu.cview(), labels_gpu.span(), rows_gpu.span());

  EXPECT_NEAR(loss_gpu, loss, 1e-12 + 1e-6 * std::abs(loss));
  expect_matches(grad, this->down(grad_gpu));
  EXPECT_EQ(correct_gpu, correct);
}

TYPED_TEST(CudaKernels, LossRefusesALabelOutOfRangeNamingTheSelection) {
  using T = TypeParam;
  const auto logits = this->up(random_dense<T>(this->cpu, 10, 3, 21));
  const auto labels = this->up(std::vector<std::int32_t>{0, 1, 2, 3, 0, 1, 2, 0, 1, 2});
  const auto rows = this->up(std::vector<std::int32_t>{0, 3});

  EXPECT_THROW(ops::softmax_cross_entropy<T>(*this->gpu, logits.cview(), labels.span(), rows.span(),
                                             2.0, DenseView<T>()),
               InvalidArgument);
}

TYPED_TEST(CudaKernels, AdamAndAdamWAreEquivalentToRef) {
  using T = TypeParam;
  for (const bool decoupled : {false, true}) {
    auto param = random_dense<T>(this->cpu, 1, 1000, 22);
    const auto grad = random_dense<T>(this->cpu, 1, 1000, 23);
    auto m = DenseT<T>::zeros(this->cpu, 1, 1000), v = DenseT<T>::zeros(this->cpu, 1, 1000);
    auto param_gpu = this->up(param), m_gpu = this->up(m), v_gpu = this->up(v);
    const auto grad_gpu = this->up(grad);
    const AdamConfig config{0.01f, 0.9f, 0.999f, 1e-8f, 5e-4f, decoupled};
    const auto s = [](auto& x) { return std::span(x.data(), static_cast<std::size_t>(x.size())); };

    for (std::int64_t step = 1; step <= 3; ++step) {
      ops::adam_step(*this->cpu, s(param), std::span<const T>(s(grad)), s(m), s(v), config, step);
      ops::adam_step(*this->gpu, s(param_gpu), std::span<const T>(s(grad_gpu)), s(m_gpu), s(v_gpu),
                     config, step);
    }

    SCOPED_TRACE(decoupled ? "AdamW" : "Adam");
    expect_matches(param, this->down(param_gpu));
  }
}

TEST_F(CudaTest, ZeroAndCopiesRoundTrip) {
  const auto x = random_dense<float>(cpu, 5, 9, 24);
  auto x_gpu = to_backend(x, gpu);
  DenseT<float> y_gpu(gpu, 5, 9);

  ops::copy(*gpu, x_gpu.cview(), y_gpu.view());
  const DenseT<float> y = to_backend(y_gpu, cpu);
  ops::zero(*gpu, std::span<float>(x_gpu.data(), 45));
  const DenseT<float> zeroed = to_backend(x_gpu, cpu);

  EXPECT_EQ(std::vector<float>(y.data(), y.data() + 45),
            std::vector<float>(x.data(), x.data() + 45));
  EXPECT_EQ(std::vector<float>(zeroed.data(), zeroed.data() + 45), std::vector<float>(45, 0.0f));
}

TEST(CudaBackendWithoutGpu, AskingForADeviceThatIsNotThereIsRefused) {
  if (!cuda_compiled()) GTEST_SKIP() << "this build has no CUDA backend";
  const int count = cuda_device_count();

  EXPECT_THROW(make_cuda_backend(count), InvalidArgument);
  EXPECT_THROW(make_cuda_backend(-1), InvalidArgument);
}

} // namespace
} // namespace tessera::testing

namespace tessera::testing {
namespace {

TEST(NcclCommunicator, ACpuRankKeepsTheHostCommunicatorOrItSaysNcclIsNotCompiled) {
  const auto host = comm::make_self_communicator();

  if (comm::nccl_compiled()) {
    EXPECT_EQ(comm::make_nccl_communicator(host, make_cpu_backend()), host);
    EXPECT_THROW(comm::make_nccl_communicator(host, nullptr), InvalidArgument);
  } else {
    EXPECT_THROW(comm::make_nccl_communicator(host, make_cpu_backend()), NotCompiled);
  }
}

TEST_F(CudaTest, NcclSumOfDeviceMemoryOverOneRankIsTheIdentity) {
  if (!comm::nccl_compiled()) GTEST_SKIP() << "this build has no NCCL";
  const auto nccl = comm::make_nccl_communicator(comm::make_self_communicator(), gpu);
  const auto x = random_dense<float>(cpu, 1, 100, 25);
  auto x_gpu = to_backend(x, gpu);

  nccl->allreduce_sum(std::span<float>(x_gpu.data(), 100));
  gpu->synchronize();

  const auto back = to_backend(x_gpu, cpu);
  EXPECT_EQ(std::vector<float>(back.data(), back.data() + 100),
            std::vector<float>(x.data(), x.data() + 100));
  EXPECT_TRUE(nccl->accepts_device_memory());
}

} // namespace
} // namespace tessera::testing
