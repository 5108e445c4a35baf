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

constexpr std::int64_t kHeads = 3; // the shape of the small tests
constexpr std::int64_t kWidth = 4; // features per head
constexpr double kSlope = 0.2;

/// Heads and features per head: the CPU kernels take other paths for some (blocked sums for
/// widths of 8 to 64, a head's four dropout draws split across two groups).
struct Shape {
  std::int64_t heads;
  std::int64_t width;
};
const Shape kShapes[] = {{kHeads, kWidth}, {1, 7},  {8, 8},  {4, 16}, {2, 32},
                         {1, 64},          {2, 64}, {1, 16}, {5, 16}};

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

/// For each edge and head, whether its score is on LeakyReLU's positive side, by the
/// definition: the finite differences below keep these sides, so a score within a step of the
/// kink does not turn the difference quotient into a secant across it.
template <typename T>
std::vector<bool> positive_scores(const CsrT<T>& a, const DenseT<T>& dst, const DenseT<T>& src) {
  const std::int64_t heads = dst.cols();
  std::vector<bool> positive(static_cast<std::size_t>(a.nnz() * heads));
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset p = a.row_ptr()[r]; p < a.row_ptr()[r + 1]; ++p) {
      for (std::int64_t h = 0; h < heads; ++h)
        positive[p * heads + h] = double{dst(r, h)} + double{src(a.col()[p], h)} > 0;
    }
  }
  return positive;
}

/// The attention of `a` by the definition, in double: alpha [nnz, H]; `positive` (when given)
/// fixes the side of LeakyReLU each score takes.
template <typename T>
std::vector<double> softmax_ref(const CsrT<T>& a, const DenseT<T>& dst, const DenseT<T>& src,
                                const std::vector<bool>* positive = nullptr) {
  const std::int64_t heads = dst.cols();
  std::vector<double> alpha(static_cast<std::size_t>(a.nnz() * heads));
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const Offset begin = a.row_ptr()[r], end = a.row_ptr()[r + 1];
    for (std::int64_t h = 0; h < heads; ++h) {
      double largest = -std::numeric_limits<double>::infinity(), sum = 0;
      std::vector<double> e;
      for (Offset p = begin; p < end; ++p) {
        const double v = double{dst(r, h)} + double{src(a.col()[p], h)};
        const bool side = positive != nullptr ? (*positive)[p * heads + h] : v > 0;
        e.push_back(side ? v : kSlope * v);
        largest = std::max(largest, e.back());
      }
      for (double& v : e) {
        v = std::exp(v - largest);
        sum += v;
      }
      for (Offset p = begin; p < end; ++p)
        alpha[p * heads + h] = e[p - begin] / sum;
    }
  }
  return alpha;
}

/// Σ over edges of alpha · x per head, by the definition.
template <typename T>
std::vector<double> edge_spmm_ref(const CsrT<T>& a, const std::vector<double>& alpha,
                                  const DenseT<T>& x) {
  const std::int64_t heads = std::ssize(alpha) / std::max<std::int64_t>(a.nnz(), 1);
  const std::int64_t width = x.cols() / std::max<std::int64_t>(heads, 1);
  std::vector<double> out(static_cast<std::size_t>(a.rows() * x.cols()), 0.0);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset p = a.row_ptr()[r]; p < a.row_ptr()[r + 1]; ++p) {
      for (std::int64_t c = 0; c < x.cols(); ++c)
        out[r * x.cols() + c] += alpha[p * heads + c / width] * double{x(a.col()[p], c)};
    }
  }
  return out;
}

/// The inputs of one attention: a graph with empty rows and a column no row reaches.
template <typename T> struct Problem {
  Problem(const BackendPtr& cpu, Shape shape)
      : heads(shape.heads), a(random_csr<T>(cpu, 23, 19, 0.2, 5, 7)),
        t(transpose_with_edges(cpu, a)), dst(random_dense<T>(cpu, 23, heads, 1)),
        src(random_dense<T>(cpu, 19, heads, 2)),
        x(random_dense<T>(cpu, 19, heads * shape.width, 3)),
        d_out(random_dense<T>(cpu, 23, heads * shape.width, 4)) {}
  std::int64_t heads;
  CsrT<T> a;
  Transposed<T> t;
  DenseT<T> dst, src, x, d_out;
};

/// edge_dropout's factor for each edge and head by its definition (rows numbered from 0).
template <typename T>
std::vector<double> dropout_ref(const CsrT<T>& a, std::int64_t heads, float prob,
                                const RngKey& key) {
  std::vector<double> keep(static_cast<std::size_t>(a.nnz() * heads));
  const std::int64_t groups = (heads + 3) / 4;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset p = a.row_ptr()[r]; p < a.row_ptr()[r + 1]; ++p) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const auto bits =
            random_bits4(key, r * groups + h / 4, static_cast<std::uint32_t>(a.col()[p]));
        keep[p * heads + h] = bits_to_unit_float(bits[h % 4]) >= prob ? 1 / (1.0 - prob) : 0;
      }
    }
  }
  return keep;
}

/// Σ d_out · edge_spmm(edge_dropout(edge_softmax(dst, src)), x) in double (`keep`:
/// dropout_ref's factors; `positive`: positive_scores at the point differentiated): the loss
/// whose gradient the backward kernels give.
template <typename T>
double loss_of(const CsrT<T>& a, const DenseT<T>& dst, const DenseT<T>& src, const DenseT<T>& x,
               const DenseT<T>& d_out, const std::vector<double>& keep,
               const std::vector<bool>& positive) {
  std::vector<double> weights = softmax_ref(a, dst, src, &positive);
  for (std::size_t i = 0; i < weights.size(); ++i)
    weights[i] *= keep[i];
  const std::vector<double> out = edge_spmm_ref(a, weights, x);
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
  for (const Shape shape : kShapes) {
    const Problem<T> in(cpu, shape);
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(::testing::Message()
                   << shape.heads << " heads of " << shape.width << ", threads " << threads);
      const ThreadCount scope(threads);
      DenseT<T> alpha(cpu, in.a.nnz(), in.heads);
      DenseT<T> out(cpu, in.a.rows(), in.x.cols());

      kernels::cpu::edge_softmax(*cpu, in.a.view(), in.dst.cview(), in.src.cview(), T(kSlope),
                                 alpha.view());
      kernels::cpu::edge_spmm(*cpu, in.a.view(), alpha.cview(), in.x.cview(), out.view());

      const std::vector<double> alpha_ref = softmax_ref(in.a, in.dst, in.src);
      expect_all_near(alpha_ref, alpha.data(), alpha.size());
      expect_all_near(edge_spmm_ref(in.a, alpha_ref, in.x), out.data(), out.size());
    }
  }
}

TYPED_TEST(AttentionKernels, BackwardIsTheGradientOfTheForwardWithAndWithoutAttentionDropout) {
  using T = TypeParam;
  const BackendPtr cpu = make_cpu_backend();
  const RngKey key = RngKey::make(7, RngPurpose::AttentionDropout, 1, 3);
  for (const Shape shape : kShapes) {
    Problem<T> in(cpu, shape);
    const std::int64_t heads = in.heads;
    for (const float prob : {0.0f, 0.4f}) {
      for (const int threads : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << shape.heads << " heads of " << shape.width
                                          << ", threads " << threads << ", dropout " << prob);
        const ThreadCount scope(threads);
        DenseT<T> alpha(cpu, in.a.nnz(), heads), weights(cpu, in.a.nnz(), heads);
        DenseT<T> d_edge(cpu, in.a.nnz(), heads);
        DenseT<T> d_dst(cpu, in.a.rows(), heads);
        DenseT<T> d_src(cpu, in.a.cols(), heads);
        DenseT<T> d_x(cpu, in.a.cols(), in.x.cols());

        kernels::cpu::edge_softmax(*cpu, in.a.view(), in.dst.cview(), in.src.cview(), T(kSlope),
                                   alpha.view());
        kernels::cpu::edge_dropout(*cpu, in.a.view(), alpha.cview(), prob, key, RowIds{},
                                   weights.view());
        const std::vector<double> keep = dropout_ref(in.a, heads, prob, key);
        std::vector<double> expected(keep.size());
        for (std::size_t i = 0; i < keep.size(); ++i)
          expected[i] = double{alpha.data()[i]} * keep[i];
        expect_all_near(expected, weights.data(), weights.size());
        if (prob > 0) { // some edges dropped, some kept
          EXPECT_GT(std::count(keep.begin(), keep.end(), 0.0), 0);
          EXPECT_LT(std::count(keep.begin(), keep.end(), 0.0), std::ssize(keep));
        }
        kernels::cpu::edge_softmax_backward(*cpu, in.a.view(), in.dst.cview(), in.src.cview(),
                                            T(kSlope), alpha.cview(), weights.cview(), in.x.cview(),
                                            in.d_out.cview(), d_dst.view(), d_edge.view());
        kernels::cpu::edge_spmm_transpose(*cpu, in.t.at.view(), in.t.edge_of.data(),
                                          weights.cview(), in.d_out.cview(), d_edge.cview(),
                                          d_x.view(), d_src.view());

        // Central differences of the loss in double over each input the backward differentiates.
        const std::vector<bool> positive = positive_scores(in.a, in.dst, in.src);
        const double step = sizeof(T) == 4 ? 1e-3 : 1e-6;
        const double scale = sizeof(T) == 4 ? 300.0 : 1e4; // the difference quotient's own error
        for (auto [input, grad] :
             {std::pair{&in.dst, &d_dst}, std::pair{&in.src, &d_src}, std::pair{&in.x, &d_x}}) {
          std::vector<double> numeric(static_cast<std::size_t>(input->size()));
          for (std::int64_t i = 0; i < input->size(); ++i) {
            const T saved = input->data()[i];
            input->data()[i] = static_cast<T>(saved + step);
            const double up = loss_of(in.a, in.dst, in.src, in.x, in.d_out, keep, positive);
            input->data()[i] = static_cast<T>(saved - step);
            const double down = loss_of(in.a, in.dst, in.src, in.x, in.d_out, keep, positive);
            input->data()[i] = saved;
            numeric[i] = (up - down) / (2 * step);
          }
          expect_all_near(numeric, grad->data(), grad->size(), scale);
        }
      }
    }
  }
}

TYPED_TEST(AttentionKernels, DropoutIsKeyedByTheGlobalIdsOfBothEnds) {
  // The same edges under another local numbering (rows' global ids given by RowIds): the same
  // edges are dropped, so a rank's tile drops what one process does.
  using T = TypeParam;
  const BackendPtr cpu = make_cpu_backend();
  // Global graph: 0 -> {0, 1, 2}, 1 -> {1, 2}, 2 -> {0}. Local numbering: global 2, 0, 1.
  const CsrT<T> global =
      make_csr<T>(cpu, 3, {{{0, T(1)}, {1, T(1)}, {2, T(1)}}, {{1, T(1)}, {2, T(1)}}, {{0, T(1)}}});
  const CsrT<T> local = make_csr<T>(cpu, 3,
                                    {{{1, T(1)}},                       // global 2
                                     {{0, T(1)}, {1, T(1)}, {2, T(1)}}, // global 0
                                     {{0, T(1)}, {2, T(1)}}});          // global 1
  const std::vector<GlobalId> ids = {2, 0, 1};
  DenseT<T> ones_g(cpu, global.nnz(), kHeads), ones_l(cpu, local.nnz(), kHeads);
  std::fill(ones_g.data(), ones_g.data() + ones_g.size(), T(1));
  std::fill(ones_l.data(), ones_l.data() + ones_l.size(), T(1));
  DenseT<T> kept_g(cpu, global.nnz(), kHeads), kept_l(cpu, local.nnz(), kHeads);
  const RngKey key = RngKey::make(11, RngPurpose::AttentionDropout, 0, 5);
  kernels::cpu::edge_dropout(*cpu, global.view(), ones_g.cview(), 0.5f, key, RowIds{},
                             kept_g.view());
  kernels::cpu::edge_dropout(*cpu, local.view(), ones_l.cview(), 0.5f, key, RowIds{ids.data(), 0},
                             kept_l.view());
  const auto edge = [](const CsrT<T>& a, std::int64_t r, LocalId c) {
    for (Offset p = a.row_ptr()[r]; p < a.row_ptr()[r + 1]; ++p) {
      if (a.col()[p] == c) return p;
    }
    return Offset{-1};
  };
  for (std::int64_t r = 0; r < 3; ++r) {
    for (Offset p = local.row_ptr()[r]; p < local.row_ptr()[r + 1]; ++p) {
      const Offset q = edge(global, ids[r], static_cast<LocalId>(ids[local.col()[p]]));
      ASSERT_GE(q, 0);
      for (std::int64_t h = 0; h < kHeads; ++h)
        EXPECT_EQ(kept_l(p, h), kept_g(q, h)) << "local row " << r << ", edge " << p;
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
