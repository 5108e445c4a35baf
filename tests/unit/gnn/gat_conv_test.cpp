// GATConv: its forward against the paper's definition computed naively, its gradients against
// finite differences (heads concatenated and averaged, with and without attention dropout, dense
// and sparse inputs), and under a memory budget against no budget.
#include "tessera/engine/row_blocks.hpp"
#include "tessera/tessera.hpp"
#include "unit/gradient_check.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <vector>

namespace tessera {
namespace {

using testing::check_module;
using testing::cpu;
using testing::dot;
using testing::expect_parameter_gradients_match;
using testing::Matrix;
using testing::random_matrix;

/// A + I of an irregular graph on 8 nodes (node 7 isolated but for its self-loop), its
/// transpose and the transpose's edge map.
struct AttentionGraph {
  CsrT<double> a, a_t;
  std::vector<Offset> edge_of;
  AttentionGraph() {
    graph::EdgeList edges;
    edges.num_nodes = 8;
    for (auto [u, v] : {std::pair{0, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {1, 5}, {5, 6}})
      edges.add(u, v);
    a = graph::gcn_normalize(graph::build_symmetric_csr(cpu(), edges)).cast<double>();
    a_t = graph::transpose(a, edge_of);
  }
};

/// The layer's output by the definition, from its parameters (W, a_src, a_dst, bias in order):
/// a head's score reads its own features, or every head's with full scores.
Matrix gat_by_definition(const CsrT<double>& a, const Matrix& x, GatConv<double>& conv,
                         std::int64_t heads, std::int64_t width, bool concat, double slope,
                         bool full_scores = false) {
  const auto params = conv.parameters();
  const DenseT<double>& w = params[0]->value;
  const DenseT<double>& att_src = params[1]->value;
  const DenseT<double>& att_dst = params[2]->value;
  const std::int64_t n = a.rows(), hf = heads * width;
  std::vector<double> z(static_cast<std::size_t>(n * hf), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < hf; ++c)
      for (std::int64_t k = 0; k < x.cols(); ++k)
        z[i * hf + c] += x(i, k) * w(k, c);
  const auto score = [&](const DenseT<double>& att, std::int64_t i, std::int64_t h) {
    double s = 0;
    if (full_scores) {
      for (std::int64_t c = 0; c < hf; ++c)
        s += z[i * hf + c] * att(h, c);
    } else {
      for (std::int64_t f = 0; f < width; ++f)
        s += z[i * hf + h * width + f] * att(h, f);
    }
    return s;
  };
  Matrix y(cpu(), n, concat ? hf : width);
  std::fill(y.data(), y.data() + y.size(), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t h = 0; h < heads; ++h) {
      std::vector<double> e;
      double sum = 0;
      for (Offset p = a.row_ptr()[i]; p < a.row_ptr()[i + 1]; ++p) {
        const double v = score(att_dst, i, h) + score(att_src, a.col()[p], h);
        e.push_back(std::exp(v > 0 ? v : slope * v));
        sum += e.back();
      }
      for (Offset p = a.row_ptr()[i]; p < a.row_ptr()[i + 1]; ++p) {
        const double alpha = e[static_cast<std::size_t>(p - a.row_ptr()[i])] / sum;
        for (std::int64_t f = 0; f < width; ++f) {
          const double term = alpha * z[a.col()[p] * hf + h * width + f];
          if (concat) {
            y(i, h * width + f) += term;
          } else {
            y(i, f) += term / static_cast<double>(heads);
          }
        }
      }
    }
    if (params.size() > 3) {
      for (std::int64_t c = 0; c < y.cols(); ++c)
        y(i, c) += params[3]->value.data()[c];
    }
  }
  return y;
}

/// Gives the bias a nonzero value, so the checks see it.
void perturb_bias(GatConv<double>& conv) {
  const auto params = conv.parameters();
  if (params.size() < 4) return;
  for (std::int64_t c = 0; c < params[3]->value.size(); ++c)
    params[3]->value.data()[c] = 0.1 * static_cast<double>(c + 1);
}

TEST(GatConv, ComputesTheDefinitionWithHeadsConcatenatedOrAveraged) {
  const AttentionGraph g;
  const Matrix x = random_matrix(8, 5, 1);
  for (const bool concat : {true, false}) {
    SCOPED_TRACE(concat ? "concat" : "mean");
    GatOptions options;
    options.heads = 3;
    options.concat = concat;
    GatConv<double> conv(cpu(), g.a, g.a_t, g.edge_of.data(), 5, 4, options, 7, 0);
    perturb_bias(conv);
    const Matrix expected =
        gat_by_definition(g.a, x, conv, 3, 4, concat, static_cast<double>(options.negative_slope));
    const ConstDenseView<double> y = conv.forward(Step{}, x.cview()).output.dense;
    ASSERT_EQ(y.cols, concat ? 12 : 4);
    ASSERT_EQ(y.rows, 8);
    for (std::int64_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(y.data[i], expected.data()[i], 1e-12) << "entry " << i;
  }
}

TEST(GatConv, WithFullScoresEachHeadScoresEveryHeadsFeatures) {
  const AttentionGraph g;
  const Matrix x = random_matrix(8, 5, 3);
  GatOptions options;
  options.heads = 3;
  options.full_scores = true;
  GatConv<double> conv(cpu(), g.a, g.a_t, g.edge_of.data(), 5, 4, options, 7, 0);
  ASSERT_EQ(conv.parameters()[1]->value.cols(), 12); // a_src: [heads, heads x width]
  perturb_bias(conv);
  const Matrix expected = gat_by_definition(g.a, x, conv, 3, 4, true,
                                            static_cast<double>(options.negative_slope), true);
  const ConstDenseView<double> y = conv.forward(Step{}, x.cview()).output.dense;
  ASSERT_EQ(y.cols, 12);
  for (std::int64_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(y.data[i], expected.data()[i], 1e-12) << "entry " << i;
  // Off-diagonal blocks matter: the same layer with them zeroed computes something else.
  const auto params = conv.parameters();
  for (Parameter<double>* att : {params[1], params[2]}) {
    for (std::int64_t h = 0; h < 3; ++h)
      for (std::int64_t c = 0; c < 12; ++c)
        if (c / 4 != h) att->value.data()[h * 12 + c] = 0.0;
  }
  const ConstDenseView<double> y0 = conv.forward(Step{}, x.cview()).output.dense;
  double differs = 0;
  for (std::int64_t i = 0; i < y0.size(); ++i)
    differs = std::max(differs, std::abs(y0.data[i] - expected.data()[i]));
  EXPECT_GT(differs, 1e-6);
}

TEST(GradientCheck, GatConvWithFullScoresMatchesFiniteDifferencesAndAccumulates) {
  const AttentionGraph g;
  GatOptions options;
  options.heads = 2;
  options.full_scores = true;
  options.attention_dropout = 0.5f;
  GatConv<double> conv(cpu(), g.a, g.a_t, g.edge_of.data(), 4, 3, options, 13, 2);
  perturb_bias(conv);
  Matrix x = random_matrix(8, 4, 4);
  const Step step{5, 3, true, {}};
  check_module(conv, x, conv.out_features(), step);
  // Accumulating adds the same gradients again: every attention entry twice what it was.
  const Matrix r = random_matrix(8, conv.out_features(), 5);
  const Context<double> ctx = conv.forward(step, x.cview());
  conv.backward(ctx, r.cview(), GradientMode::Ignore, GradientMode::Overwrite);
  const DenseT<double>& grad = conv.parameters()[1]->grad;
  const std::vector<double> once(grad.data(), grad.data() + grad.size());
  conv.backward(ctx, r.cview(), GradientMode::Ignore, GradientMode::Accumulate);
  for (std::int64_t i = 0; i < grad.size(); ++i)
    EXPECT_NEAR(grad.data()[i], 2 * once[static_cast<std::size_t>(i)], 1e-12) << "entry " << i;
}

TEST(GradientCheck, GatConvMatchesFiniteDifferencesWithAndWithoutAttentionDropout) {
  const AttentionGraph g;
  for (const bool concat : {true, false}) {
    for (const float dropout : {0.0f, 0.5f}) {
      SCOPED_TRACE(::testing::Message() << (concat ? "concat" : "mean") << ", dropout " << dropout);
      GatOptions options;
      options.heads = 2;
      options.concat = concat;
      options.attention_dropout = dropout;
      GatConv<double> conv(cpu(), g.a, g.a_t, g.edge_of.data(), 4, 3, options, 11, 1);
      perturb_bias(conv);
      Matrix x = random_matrix(8, 4, 2);
      const Step step{5, 3, true, {}}; // training: the masks of epoch 3
      check_module(conv, x, conv.out_features(), step);
    }
  }
}

TEST(GradientCheck, GatConvWithSparseInputMatchesFiniteDifferencesForWeights) {
  const AttentionGraph g;
  // An 8x6 sparse input with an empty row.
  std::vector<std::vector<std::pair<LocalId, double>>> rows = {
      {{0, 0.5}, {3, 1.0}}, {{5, 0.75}}, {{1, 1.5}, {2, 0.25}}, {}, {{4, 2.0}}, {{0, 1.0}},
      {{5, 0.5}},           {{2, 1.0}}};
  CsrT<double> features(cpu(), 8, 6, 10);
  Offset k = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (const auto& [c, v] : rows[r]) {
      features.col()[k] = c;
      features.val()[k++] = v;
    }
    features.row_ptr()[r + 1] = k;
  }
  GatOptions options;
  options.heads = 2;
  GatConv<double> conv(cpu(), g.a, g.a_t, g.edge_of.data(), 6, 2, options, 3, 0);
  const Matrix r = random_matrix(8, conv.out_features(), 4);
  const auto objective = [&] {
    return dot(conv.forward(Step{}, Input<double>(features.view())).output.dense, r.cview());
  };
  const Context<double> ctx = conv.forward(Step{}, Input<double>(features.view()));
  conv.backward(ctx, r.cview(), GradientMode::Ignore, GradientMode::Overwrite);
  expect_parameter_gradients_match(objective, conv.parameters());
}

TEST(GatConv, RefusesSettingsOutOfRangeAndInputsOfAnotherShape) {
  const AttentionGraph g;
  const auto make = [&](std::int64_t heads, float dropout) {
    GatOptions options;
    options.heads = heads;
    options.attention_dropout = dropout;
    return GatConv<double>(cpu(), g.a, g.a_t, g.edge_of.data(), 4, 3, options, 1, 0);
  };
  EXPECT_THROW(make(0, 0.0f), InvalidArgument);
  EXPECT_THROW(make(2, 1.0f), InvalidArgument);
  EXPECT_THROW(make(2, -0.1f), InvalidArgument);
  GatConv<double> conv(cpu(), g.a, g.a_t, g.edge_of.data(), 4, 3, GatOptions{}, 1, 0);
  const Matrix wrong = random_matrix(8, 5, 1);
  try {
    conv.forward(Step{}, wrong.cview());
    FAIL() << "a [8, 5] input was taken by a layer of 4 inputs";
  } catch (const DimensionMismatch& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("GATConv(4 -> 1x3, concat): input [8, 5]"));
  }
}

TEST(GatConv, UnderAMemoryBudgetComputesWhatItComputesWithoutOneAndRefusesATooSmallOne) {
  const AttentionGraph g;
  const Matrix x = random_matrix(8, 5, 1);
  const Matrix d_out = random_matrix(8, 6, 2);
  GatOptions options;
  options.heads = 2;
  options.attention_dropout = 0.3f;
  const Step step{1, 2, true, {}};

  Sequential<double> plain;
  plain.add(
      std::make_unique<GatConv<double>>(cpu(), g.a, g.a_t, g.edge_of.data(), 5, 3, options, 9, 0));
  const ConstDenseView<double> y_plain = plain.forward(step, x.cview());
  const std::vector<double> expected(y_plain.data, y_plain.data + y_plain.size());
  plain.backward(d_out.cview());

  for (const std::size_t budget : {std::size_t{1} << 20, std::size_t{16} << 10}) {
    SCOPED_TRACE(budget);
    OffloadConfig config;
    config.chunk_bytes = std::size_t{4} << 10;
    config.device_bytes = budget;
    ChunkManager memory(cpu(), config);
    const BackendPtr matrices = memory.allocator(TensorKind::Matrix);
    const CsrT<double> am = to_backend(g.a, matrices), atm = to_backend(g.a_t, matrices);
    Buffer<Offset> edge_of(matrices, static_cast<std::int64_t>(g.edge_of.size()));
    matrices->copy_from_host(edge_of.data(), g.edge_of.data(), edge_of.bytes());
    Sequential<double> managed;
    managed.add(std::make_unique<GatConv<double>>(memory.allocator(TensorKind::Activation), am, atm,
                                                  edge_of.data(), 5, 3, options, 9, 0));
    managed.use_memory(&memory);
    if (budget < (std::size_t{64} << 10)) {
      try {
        managed.forward(step, x.cview());
        FAIL() << "a budget of 16 KiB ran a layer that needs more";
      } catch (const InvalidArgument& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("more than the memory budget of 16 KiB holds"));
      }
      continue;
    }
    const ConstDenseView<double> y = managed.forward(step, x.cview());
    std::vector<double> got(static_cast<std::size_t>(y.size()));
    cpu()->copy_to_host(got.data(), y.data, got.size() * sizeof(double));
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-12);
    managed.backward(d_out.cview());
    const auto pp = plain.parameters(), pm = managed.parameters();
    ASSERT_EQ(pp.size(), pm.size());
    for (std::size_t i = 0; i < pp.size(); ++i) {
      std::vector<double> grad(static_cast<std::size_t>(pm[i]->grad.size()));
      cpu()->copy_to_host(grad.data(), pm[i]->grad.data(), grad.size() * sizeof(double));
      for (std::size_t j = 0; j < grad.size(); ++j)
        EXPECT_NEAR(grad[j], pp[i]->grad.data()[j], 1e-12) << pp[i]->name;
    }
  }
}

} // namespace
} // namespace tessera
