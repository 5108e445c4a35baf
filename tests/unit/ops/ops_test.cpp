// The op layer: shape checks name the op and both shapes; SpMM accumulates with beta; dispatch
// reaches the CUDA stubs; the loss gradient matches finite differences.
#include "tessera/core/error.hpp"
#include "tessera/ops/backends.hpp"
#include "tessera/ops/ops.hpp"
#include "unit/gradient_check.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <new>
#include <vector>

namespace tessera::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

/// A backend that claims to be a GPU, to reach the CUDA dispatch path in a CPU-only build.
class FakeCudaBackend final : public Backend {
public:
  DeviceKind kind() const noexcept override { return DeviceKind::Cuda; }
  int device_id() const noexcept override { return 0; }
  int num_threads() const noexcept override { return 1; }
  void* allocate(std::size_t) const override { throw std::bad_alloc(); }
  void deallocate(void*, std::size_t) const noexcept override {}
  void copy_from_host(void*, const void*, std::size_t) const override {}
  void copy_to_host(void*, const void*, std::size_t) const override {}
  void copy_within(void*, const void*, std::size_t) const override {}
  void zero_bytes(void*, std::size_t) const override {}
  void synchronize() const override {}
  void* allocate_pinned(std::size_t) const override { throw std::bad_alloc(); }
  void deallocate_pinned(void*, std::size_t) const noexcept override {}
  std::shared_ptr<Event> copy_async(void*, const void*, std::size_t, CopyDirection) const override {
    return nullptr;
  }
  std::shared_ptr<Event> record(Stream) const override { return nullptr; }
  void wait(Stream, const Event&) const override {}
  std::unique_ptr<AddressSpace> reserve_address_space(std::size_t, std::size_t,
                                                      int) const override {
    return nullptr;
  }
  std::size_t address_granularity() const override { return 1; }
  std::string describe() const override { return "fake cuda"; }
};

class Ops : public ::testing::Test {
protected:
  BackendPtr cpu = make_cpu_backend();
  FakeCudaBackend cuda;
};

TEST_F(Ops, SpmmRejectsMismatchedInnerDimensionQuotingBothShapes) {
  const auto a = random_csr<float>(cpu, 4, 5, 0.5, 1);
  const auto b = random_dense<float>(cpu, 6, 3, 2);
  DenseT<float> c(cpu, 4, 3);

  EXPECT_THAT([&] { ops::spmm(*cpu, a.view(), b.cview(), c.view()); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("spmm"), HasSubstr("[4, 5]"), HasSubstr("[6, 3]"))));
}

TEST_F(Ops, SpmmRejectsWrongOutputShape) {
  const auto a = random_csr<float>(cpu, 4, 5, 0.5, 1);
  const auto b = random_dense<float>(cpu, 5, 3, 2);
  DenseT<float> c(cpu, 4, 2);

  EXPECT_THAT([&] { ops::spmm(*cpu, a.view(), b.cview(), c.view()); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("spmm"), HasSubstr("[4, 3]"), HasSubstr("[4, 2]"))));
}

TEST_F(Ops, Bf16OpsRejectWrongShapesQuotingThem) {
  const auto a = random_csr<float>(cpu, 4, 5, 0.5, 1);
  DenseT<Bf16> b(cpu, 6, 3);
  DenseT<float> c(cpu, 4, 3), x(cpu, 6, 2);

  EXPECT_THAT([&] { ops::spmm_bf16(*cpu, a.view(), b.cview(), c.view()); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("spmm_bf16"), HasSubstr("[4, 5]"), HasSubstr("[6, 3]"))));
  EXPECT_THAT([&] { ops::round_to_bf16(*cpu, x.cview(), b.view()); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("round_to_bf16"), HasSubstr("[6, 2]"), HasSubstr("[6, 3]"))));
}

/// Rounds every value to a multiple of 1/2 in [-4, 4]: products and sums of a few such values
/// are exact in float and double, so accumulation orders cannot differ.
template <typename T> void round_to_halves(T* values, std::int64_t size) {
  for (std::int64_t i = 0; i < size; ++i)
    values[i] = std::round(values[i] * T{8}) / T{2};
}

/// ops::spmm with beta, on both value types; widths reach the kernel's wide blocks and its tail.
template <typename T> class SpmmBeta : public ::testing::Test {
protected:
  BackendPtr cpu = make_cpu_backend();

  CsrT<T> halves_csr(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
    auto a = random_csr<T>(cpu, rows, cols, 0.3, seed, 5);
    round_to_halves(a.val(), a.nnz());
    return a;
  }
  DenseT<T> halves_dense(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
    auto x = random_dense<T>(cpu, rows, cols, seed);
    round_to_halves(x.data(), x.size());
    return x;
  }
};
TYPED_TEST_SUITE(SpmmBeta, ValueTypes);

TYPED_TEST(SpmmBeta, BetaTimesCAddedToTheProductIsExact) {
  using T = TypeParam;
  for (const std::int64_t n : {3, 19, 130}) {
    for (const T beta : {T{1}, T{2}, T{-0.5}}) {
      SCOPED_TRACE(::testing::Message() << "width " << n << ", beta " << beta);
      const auto a = this->halves_csr(37, 23, 3 * n);
      const auto b = this->halves_dense(23, n, 5 * n);
      const auto c0 = this->halves_dense(37, n, 7 * n);
      DenseT<T> product(this->cpu, 37, n);
      ops::spmm(*this->cpu, a.view(), b.cview(), product.view());
      DenseT<T> c(this->cpu, 37, n);
      ops::copy(*this->cpu, c0.cview(), c.view());

      ops::spmm(*this->cpu, a.view(), b.cview(), c.view(), beta);

      for (std::int64_t i = 0; i < c.size(); ++i)
        ASSERT_EQ(c.data()[i], product.data()[i] + beta * c0.data()[i]) << "element " << i;
    }
  }
}

TYPED_TEST(SpmmBeta, BetaZeroOverwritesNaNInC) {
  using T = TypeParam;
  const auto a = this->halves_csr(41, 17, 1); // every fifth row empty
  const auto b = this->halves_dense(17, 70, 2);
  DenseT<T> expected = DenseT<T>::zeros(this->cpu, 41, 70);
  ops::spmm(*this->cpu, a.view(), b.cview(), expected.view());
  DenseT<T> c(this->cpu, 41, 70);
  c.fill(std::numeric_limits<T>::quiet_NaN());

  ops::spmm(*this->cpu, a.view(), b.cview(), c.view(), T{0});

  for (std::int64_t i = 0; i < c.size(); ++i)
    ASSERT_EQ(c.data()[i], expected.data()[i]) << "element " << i;
}

TYPED_TEST(SpmmBeta, RowSliceWithBetaOneAccumulatesOnlyIntoItsRows) {
  using T = TypeParam;
  const auto a = this->halves_csr(50, 31, 3);
  const auto b = this->halves_dense(31, 21, 4);
  const auto c0 = this->halves_dense(50, 21, 5);
  DenseT<T> whole(this->cpu, 50, 21);
  ops::spmm(*this->cpu, a.view(), b.cview(), whole.view());
  DenseT<T> c(this->cpu, 50, 21);
  ops::copy(*this->cpu, c0.cview(), c.view());

  ops::spmm(*this->cpu, a.view().row_slice(12, 40), b.cview(), c.view().slice_rows(12, 40), T{1});

  for (std::int64_t r = 0; r < 50; ++r) {
    const bool inside = r >= 12 && r < 40;
    for (std::int64_t j = 0; j < 21; ++j) {
      const T expected = inside ? whole(r, j) + c0(r, j) : c0(r, j);
      ASSERT_EQ(c(r, j), expected) << "row " << r << ", column " << j;
    }
  }
}

TEST_F(Ops, SpmmTransposeRejectsMismatchedRows) {
  const auto a = random_csr<float>(cpu, 4, 5, 0.5, 1);
  const auto b = random_dense<float>(cpu, 3, 2, 2);
  DenseT<float> c(cpu, 5, 2);

  EXPECT_THAT([&] { ops::spmm_transpose(*cpu, a.view(), b.cview(), c.view()); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("spmm_transpose"), HasSubstr("[4, 5]"), HasSubstr("[3, 2]"))));
}

TEST_F(Ops, GemmChecksTheTransposedShapes) {
  const auto a = random_dense<double>(cpu, 3, 4, 1);
  const auto b = random_dense<double>(cpu, 3, 2, 2);
  DenseT<double> c(cpu, 4, 2);
  DenseT<double> wrong_c(cpu, 3, 2);

  ops::gemm(*cpu, Transpose::Yes, Transpose::No, 1.0, a.cview(), b.cview(), 0.0, c.view());

  EXPECT_THAT(
      [&] {
        ops::gemm(*cpu, Transpose::No, Transpose::No, 1.0, a.cview(), b.cview(), 0.0, c.view());
      },
      ThrowsMessage<DimensionMismatch>(
          AllOf(HasSubstr("gemm"), HasSubstr("[3, 4]"), HasSubstr("[3, 2]"))));
  EXPECT_THAT(
      [&] {
        ops::gemm(*cpu, Transpose::Yes, Transpose::No, 1.0, a.cview(), b.cview(), 0.0,
                  wrong_c.view());
      },
      ThrowsMessage<DimensionMismatch>(AllOf(HasSubstr("[4, 2]"), HasSubstr("[3, 2]"))));
}

TEST_F(Ops, ElementwiseOpsRejectDifferentShapes) {
  const auto x = random_dense<float>(cpu, 3, 4, 1);
  DenseT<float> y(cpu, 4, 3);
  const RngKey key{};

  EXPECT_THROW(ops::copy(*cpu, x.cview(), y.view()), DimensionMismatch);
  EXPECT_THROW(ops::relu_forward(*cpu, x.cview(), y.view()), DimensionMismatch);
  EXPECT_THROW(ops::relu_backward(*cpu, x.cview(), x.cview(), y.view()), DimensionMismatch);
  EXPECT_THAT([&] { ops::dropout_forward(*cpu, x.cview(), y.view(), 0.5f, key, {}); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("dropout_forward"), HasSubstr("[3, 4]"), HasSubstr("[4, 3]"))));
}

TEST_F(Ops, BiasOpsRejectWrongBiasLength) {
  auto x = random_dense<float>(cpu, 3, 4, 1);
  std::vector<float> bias(5);

  EXPECT_THAT([&] { ops::add_bias(*cpu, x.view(), std::span<const float>(bias)); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("add_bias"), HasSubstr("[3, 4]"), HasSubstr("[5]"))));
  EXPECT_THAT([&] { ops::bias_grad(*cpu, x.cview(), std::span<float>(bias), false); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("bias_grad"), HasSubstr("[3, 4]"), HasSubstr("[5]"))));
}

TEST_F(Ops, AxpyRejectsDifferentLengths) {
  const std::vector<float> x(3);
  std::vector<float> y(4);

  EXPECT_THAT([&] { ops::axpy(*cpu, 1.0f, std::span<const float>(x), std::span<float>(y)); },
              ThrowsMessage<DimensionMismatch>(
                  AllOf(HasSubstr("axpy"), HasSubstr("[3]"), HasSubstr("[4]"))));
}

TEST_F(Ops, DropoutRejectsProbabilityOutsideZeroToOne) {
  const auto x = random_dense<float>(cpu, 3, 4, 1);
  DenseT<float> y(cpu, 3, 4);
  const auto a = random_csr<float>(cpu, 3, 4, 0.5, 1);
  std::vector<float> values(static_cast<std::size_t>(a.nnz()));

  for (const float p : {-0.1f, 1.0f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_THROW(ops::dropout_forward(*cpu, x.cview(), y.view(), p, {}, {}), InvalidArgument);
    EXPECT_THROW(ops::dropout_backward(*cpu, x.cview(), y.view(), p, {}, {}), InvalidArgument);
    EXPECT_THROW(ops::dropout_csr_values(*cpu, a.view(), std::span<float>(values), p, {}, {}),
                 InvalidArgument);
  }
}

TEST_F(Ops, DropoutWithZeroProbabilityCopies) {
  const auto x = random_dense<float>(cpu, 5, 7, 1);
  DenseT<float> y(cpu, 5, 7);
  const auto a = random_csr<float>(cpu, 5, 7, 0.5, 1);
  std::vector<float> values(static_cast<std::size_t>(a.nnz()));

  ops::dropout_forward(*cpu, x.cview(), y.view(), 0.0f, {}, {});
  ops::dropout_csr_values(*cpu, a.view(), std::span<float>(values), 0.0f, {}, {});

  EXPECT_EQ(std::vector<float>(y.data(), y.data() + y.size()),
            std::vector<float>(x.data(), x.data() + x.size()));
  EXPECT_EQ(values, std::vector<float>(a.val(), a.val() + a.nnz()));
}

TEST_F(Ops, DropoutCsrRejectsTooFewValues) {
  const auto a = random_csr<float>(cpu, 5, 7, 0.5, 1);
  std::vector<float> values(static_cast<std::size_t>(a.nnz()) - 1);

  EXPECT_THROW(ops::dropout_csr_values(*cpu, a.view(), std::span<float>(values), 0.5f, {}, {}),
               DimensionMismatch);
  EXPECT_THROW(ops::dropout_csr_values(*cpu, a.view().row_slice(2, 5), std::span<float>(values),
                                       0.0f, {}, RowIds{nullptr, 2}),
               DimensionMismatch);
}

TEST_F(Ops, DropoutCsrOfRowSlicesWritesTheirEntriesAsTheWholeMatrixDoes) {
  // Row blocks under a memory budget: each slice writes its entries, numbered as in the whole.
  const auto a = random_csr<float>(cpu, 6, 7, 0.5, 2);
  ASSERT_GT(a.view().row_slice(3, 6).row_ptr[0], 0);
  const RngKey key = RngKey::make(5, RngPurpose::Dropout, 0, 1);
  for (const float p : {0.0f, 0.5f}) {
    std::vector<float> whole(static_cast<std::size_t>(a.nnz())), sliced(whole.size(), -1.0f);
    ops::dropout_csr_values(*cpu, a.view(), std::span<float>(whole), p, key, {});
    for (const auto& [b, e] : {std::pair{0, 3}, std::pair{3, 6}}) {
      ops::dropout_csr_values(*cpu, a.view().row_slice(b, e), std::span<float>(sliced), p, key,
                              RowIds{nullptr, b});
    }
    EXPECT_EQ(sliced, whole);
  }
}

TEST_F(Ops, LossOpsRejectWrongLabelCountAndBadNormalizer) {
  const auto logits = random_dense<float>(cpu, 4, 3, 1);
  const std::vector<std::int32_t> labels = {0, 1, 2};
  const std::vector<std::int32_t> good_labels = {0, 1, 2, 0};
  const std::vector<std::int32_t> rows = {0, 1};
  DenseT<float> wrong_grad(cpu, 3, 3);

  EXPECT_THAT(
      [&] { ops::softmax_cross_entropy<float>(*cpu, logits.cview(), labels, rows, 1.0, {}); },
      ThrowsMessage<DimensionMismatch>(
          AllOf(HasSubstr("softmax_cross_entropy"), HasSubstr("[4, 3]"), HasSubstr("[3]"))));
  EXPECT_THROW(ops::count_correct<float>(*cpu, logits.cview(), labels, rows), DimensionMismatch);
  EXPECT_THROW(ops::softmax_cross_entropy<float>(*cpu, logits.cview(), good_labels, rows, 1.0,
                                                 wrong_grad.view()),
               DimensionMismatch);
  EXPECT_THROW(ops::softmax_cross_entropy<float>(*cpu, logits.cview(), good_labels, rows, 0.0, {}),
               InvalidArgument);
}

TEST_F(Ops, AdamRejectsMismatchedSizesAndStepZero) {
  std::vector<float> param(4), grad(4), m(4), v(3);
  const AdamConfig config;

  EXPECT_THAT(
      [&] {
        ops::adam_step(*cpu, std::span<float>(param), std::span<const float>(grad),
                       std::span<float>(m), std::span<float>(v), config, 1);
      },
      ThrowsMessage<DimensionMismatch>(
          AllOf(HasSubstr("adam_step"), HasSubstr("[4]"), HasSubstr("[3]"))));
  v.resize(4);
  EXPECT_THROW(ops::adam_step(*cpu, std::span<float>(param), std::span<const float>(grad),
                              std::span<float>(m), std::span<float>(v), config, 0),
               InvalidArgument);
}

TEST(CudaBackend, DeviceCountIsZeroWithoutCudaAndMakingOneIsRefused) {
  if (cuda_compiled()) GTEST_SKIP() << "this build has the CUDA backend";

  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_THROW(make_cuda_backend(0), NotCompiled);
}

TEST_F(Ops, CudaBackendThrowsNotCompiledInACpuOnlyBuild) {
  if (cuda_compiled()) GTEST_SKIP() << "this build has the CUDA backend";
  const auto a = random_csr<float>(cpu, 4, 5, 0.5, 1);
  const auto b = random_dense<float>(cpu, 5, 3, 2);
  DenseT<float> c(cpu, 4, 3);
  std::vector<float> x(4);

  EXPECT_THAT([&] { ops::spmm(cuda, a.view(), b.cview(), c.view()); },
              ThrowsMessage<NotCompiled>(
                  AllOf(HasSubstr("CUDA kernel spmm"), HasSubstr("-DTESSERA_WITH_CUDA=ON"))));
  EXPECT_THROW(ops::gemm(cuda, Transpose::No, Transpose::No, 1.0f, b.cview(),
                         DenseT<float>(cpu, 3, 3).cview(), 0.0f, DenseT<float>(cpu, 5, 3).view()),
               NotCompiled);
  EXPECT_THROW(ops::relu_forward(cuda, b.cview(), DenseT<float>(cpu, 5, 3).view()), NotCompiled);
  EXPECT_THROW(ops::zero(cuda, std::span<float>(x)), NotCompiled);
  EXPECT_THROW(ops::softmax_cross_entropy<float>(cuda, c.cview(), std::vector<std::int32_t>(4),
                                                 std::vector<std::int32_t>{}, 1.0, {}),
               NotCompiled);
}

TEST(GradientCheck, SoftmaxCrossEntropyMatchesFiniteDifferences) {
  Matrix logits = random_matrix(6, 4, 10);
  const std::vector<std::int32_t> labels{0, 3, 1, 2, 2, 0};
  const std::vector<std::int32_t> rows{0, 2, 3, 5};
  Matrix grad(cpu(), 6, 4);
  const auto objective = [&] {
    return ops::softmax_cross_entropy<double>(*cpu(), logits.cview(), labels, rows, 4.0, {});
  };

  ops::softmax_cross_entropy<double>(*cpu(), logits.cview(), labels, rows, 4.0, grad.view());

  expect_gradient_matches(objective, logits.data(), logits.size(), grad.data(), "logits");
}

// Issue 39: the graph-attention ops refuse shapes that do not fit, naming the op and both shapes.
TEST_F(Ops, GraphAttentionShapesThatDoNotFitAreRefusedNamingTheOp) {
  const auto a = random_csr<float>(cpu, 6, 5, 0.5, 1);
  const auto dst = random_dense<float>(cpu, 6, 2, 2), src = random_dense<float>(cpu, 5, 2, 3);
  const auto x = random_dense<float>(cpu, 5, 8, 4);
  DenseT<float> alpha(cpu, a.nnz(), 2), out(cpu, 6, 8);
  DenseT<float> short_alpha(cpu, a.nnz() - 1, 2), no_heads(cpu, a.nnz(), 0);
  const auto odd_x = random_dense<float>(cpu, 5, 7, 5);
  const auto wrong_src = random_dense<float>(cpu, 4, 2, 6);

  EXPECT_NO_THROW(ops::edge_softmax(*cpu, a.view(), dst.cview(), src.cview(), 0.2f, alpha.view()));
  EXPECT_NO_THROW(ops::edge_spmm(*cpu, a.view(), alpha.cview(), x.cview(), out.view()));
  EXPECT_THAT(
      [&] {
        ops::edge_softmax(*cpu, a.view(), dst.cview(), src.cview(), 0.2f, short_alpha.view());
      },
      ThrowsMessage<DimensionMismatch>(
          AllOf(HasSubstr("edge_softmax"), HasSubstr("a row per edge of A"))));
  EXPECT_THAT(
      [&] {
        ops::edge_softmax(*cpu, a.view(), dst.cview(), wrong_src.cview(), 0.2f, alpha.view());
      },
      ThrowsMessage<DimensionMismatch>(HasSubstr("score_src of shape [A.cols, heads]")));
  EXPECT_THAT([&] { ops::edge_spmm(*cpu, a.view(), no_heads.cview(), x.cview(), out.view()); },
              ThrowsMessage<DimensionMismatch>(HasSubstr("at least one head")));
  EXPECT_THAT(
      [&] { ops::edge_spmm(*cpu, a.view(), alpha.cview(), odd_x.cview(), out.view()); },
      ThrowsMessage<DimensionMismatch>(
          AllOf(HasSubstr("rows summed of shape [A.cols, heads · F]"), HasSubstr("x is [5, 7]"))));
}

} // namespace
} // namespace tessera::testing
