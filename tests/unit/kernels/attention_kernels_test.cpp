// The CPU graph-attention kernels against their definitions in double, and their backward against
// finite differences of a scalar loss, at 1 thread and at 3 (the results may not depend on it).
#include "tessera/kernels/attention_kernels.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <vector>

namespace tessera::testing {
namespace {

constexpr std::int64_t kHeads = 3;
constexpr std::int64_t kWidth = 4; // features per head
constexpr double kSlope = 0.2;

/// aᵀ's structure and, for each of its edges, the edge of `a` it is.
template <typename T> struct Transposed {
  CsrT<T> at;
  std::vector<Offset> edge_of;
};

template <typename T> Transposed<T> transpose_with_edges(const BackendPtr& cpu, const CsrT<T>& a) {
  std::vector<std::vector<std::pair<LocalId, T>>> rows(static_cast<std::size_t>(a.cols()));
  std::vector<std::vector<Offset>> edges(static_cast<std::size_t>(a.cols()));
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset p = a.row_ptr()[r]; p < a.row_ptr()[r + 1]; ++p) {
      rows[a.col()[p]].emplace_back(static_cast<LocalId>(r), a.val()[p]);
      edges[a.col()[p]].push_back(p);
    }
  }
  Transposed<T> t{make_csr<T>(cpu, a.rows(), rows), {}};
  for (const auto& list : edges)
    t.edge_of.insert(t.edge_of.end(), list.begin(), list.end());
  return t;
}

/// The attention of `a` by the definition, in double: alpha [nnz, H].
template <typename T>
std::vector<double> softmax_ref(const CsrT<T>& a, const DenseT<T>& dst, const DenseT<T>& src) {
  std::vector<double> alpha(static_cast<std::size_t>(a.nnz() * kHeads));
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const Offset begin = a.row_ptr()[r], end = a.row_ptr()[r + 1];
    for (std::int64_t h = 0; h < kHeads; ++h) {
      double largest = -std::numeric_limits<double>::infinity(), sum = 0;
      std::vector<double> e;
      for (Offset p = begin; p < end; ++p) {
        const double v = double{dst(r, h)} + double{src(a.col()[p], h)};
        e.push_back(v > 0 ? v : kSlope * v);
        largest = std::max(largest, e.back());
      }
      for (double& v : e) {
        v = std::exp(v - largest);
        sum += v;
      }
      for (Offset p = begin; p < end; ++p)
        alpha[p * kHeads + h] = e[p - begin] / sum;
    }
  }
  return alpha;
}

/// Σ over edges of alpha · x per head, by the definition.
template <typename T>
std::vector<double> edge_spmm_ref(const CsrT<T>& a, const std::vector<double>& alpha,
                                  const DenseT<T>& x) {
  std::vector<double> out(static_cast<std::size_t>(a.rows() * x.cols()), 0.0);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset p = a.row_ptr()[r]; p < a.row_ptr()[r + 1]; ++p) {
      for (std::int64_t c = 0; c < x.cols(); ++c)
        out[r * x.cols() + c] += alpha[p * kHeads + c / kWidth] * double{x(a.col()[p], c)};
    }
  }
  return out;
}

/// The inputs of one attention: a graph with empty rows and a column no row reaches.
template <typename T> struct Problem {
  explicit Problem(const BackendPtr& cpu)
      : a(random_csr<T>(cpu, 23, 19, 0.2, 5, 7)), t(transpose_with_edges(cpu, a)),
        dst(random_dense<T>(cpu, 23, kHeads, 1)), src(random_dense<T>(cpu, 19, kHeads, 2)),
        x(random_dense<T>(cpu, 19, kHeads * kWidth, 3)),
        d_out(random_dense<T>(cpu, 23, kHeads * kWidth, 4)) {}
  CsrT<T> a;
  Transposed<T> t;
  DenseT<T> dst, src, x, d_out;
};

/// Σ d_out · edge_spmm(edge_softmax(dst, src), x) in double: the loss whose gradient the
/// backward kernels give.
template <typename T>
double loss_of(const CsrT<T>& a, const DenseT<T>& dst, const DenseT<T>& src, const DenseT<T>& x,
               const DenseT<T>& d_out) {
  const std::vector<double> out = edge_spmm_ref(a, softmax_ref(a, dst, src), x);
  double loss = 0;
  for (std::int64_t i = 0; i < d_out.size(); ++i)
    loss += out[i] * double{d_out.data()[i]};
  return loss;
}

template <typename T> class AttentionKernels : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionKernels, ValueTypes);

TYPED_TEST(AttentionKernels, SoftmaxAndWeightedSumMatchTheirDefinitions) {
  using T = TypeParam;
  const BackendPtr cpu = make_cpu_backend();
  const Problem<T> in(cpu);
  for (const int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    const ThreadCount scope(threads);
    DenseT<T> alpha(cpu, in.a.nnz(), kHeads);
    DenseT<T> out(cpu, in.a.rows(), kHeads * kWidth);

    kernels::cpu::edge_softmax(*cpu, in.a.view(), in.dst.cview(), in.src.cview(), T(kSlope),
                               alpha.view());
    kernels::cpu::edge_spmm(*cpu, in.a.view(), alpha.cview(), in.x.cview(), out.view());

    const std::vector<double> alpha_ref = softmax_ref(in.a, in.dst, in.src);
    expect_all_near(alpha_ref, alpha.data(), alpha.size());
    expect_all_near(edge_spmm_ref(in.a, alpha_ref, in.x), out.data(), out.size());
  }
}

TYPED_TEST(AttentionKernels, BackwardIsTheGradientOfTheForward) {
  using T = TypeParam;
  const BackendPtr cpu = make_cpu_backend();
  Problem<T> in(cpu);
  for (const int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    const ThreadCount scope(threads);
    DenseT<T> alpha(cpu, in.a.nnz(), kHeads);
    DenseT<T> d_edge(cpu, in.a.nnz(), kHeads);
    DenseT<T> d_dst(cpu, in.a.rows(), kHeads);
    DenseT<T> d_src(cpu, in.a.cols(), kHeads);
    DenseT<T> d_x(cpu, in.a.cols(), kHeads * kWidth);

    kernels::cpu::edge_softmax(*cpu, in.a.view(), in.dst.cview(), in.src.cview(), T(kSlope),
                               alpha.view());
    kernels::cpu::edge_softmax_backward(*cpu, in.a.view(), in.dst.cview(), in.src.cview(),
                                        T(kSlope), alpha.cview(), in.x.cview(), in.d_out.cview(),
                                        d_dst.view(), d_edge.view());
    kernels::cpu::edge_spmm_transpose(*cpu, in.t.at.view(), in.t.edge_of.data(), alpha.cview(),
                                      in.d_out.cview(), d_edge.cview(), d_x.view(), d_src.view());

    // Central differences of the loss in double over each input the backward differentiates.
    const double step = sizeof(T) == 4 ? 1e-3 : 1e-6;
    const double scale = sizeof(T) == 4 ? 300.0 : 1e4; // the difference quotient's own error
    for (auto [input, grad] :
         {std::pair{&in.dst, &d_dst}, std::pair{&in.src, &d_src}, std::pair{&in.x, &d_x}}) {
      std::vector<double> numeric(static_cast<std::size_t>(input->size()));
      for (std::int64_t i = 0; i < input->size(); ++i) {
        const T saved = input->data()[i];
        input->data()[i] = static_cast<T>(saved + step);
        const double up = loss_of(in.a, in.dst, in.src, in.x, in.d_out);
        input->data()[i] = static_cast<T>(saved - step);
        const double down = loss_of(in.a, in.dst, in.src, in.x, in.d_out);
        input->data()[i] = saved;
        numeric[i] = (up - down) / (2 * step);
      }
      expect_all_near(numeric, grad->data(), grad->size(), scale);
    }
  }
}

TYPED_TEST(AttentionKernels, ARowWithoutEdgesGetsZerosAndNoAttention) {
  using T = TypeParam;
  const BackendPtr cpu = make_cpu_backend();
  const CsrT<T> a = make_csr<T>(cpu, 2, {{}, {{0, T(1)}, {1, T(1)}}});
  DenseT<T> dst = random_dense<T>(cpu, 2, kHeads, 8), src = random_dense<T>(cpu, 2, kHeads, 9);
  DenseT<T> x = random_dense<T>(cpu, 2, kHeads * kWidth, 10);
  DenseT<T> alpha(cpu, a.nnz(), kHeads);
  DenseT<T> out(cpu, 2, kHeads * kWidth);
  std::fill(out.data(), out.data() + out.size(), std::numeric_limits<T>::quiet_NaN());

  kernels::cpu::edge_softmax(*cpu, a.view(), dst.cview(), src.cview(), T(kSlope), alpha.view());
  kernels::cpu::edge_spmm(*cpu, a.view(), alpha.cview(), x.cview(), out.view());

  for (std::int64_t c = 0; c < out.cols(); ++c)
    EXPECT_EQ(out(0, c), T(0));
  for (std::int64_t h = 0; h < kHeads; ++h)
    EXPECT_NEAR(double{alpha(0, h)} + double{alpha(1, h)}, 1.0, 1e-6);
}

} // namespace
} // namespace tessera::testing
