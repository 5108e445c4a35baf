// Finite-difference gradient checks in float64 for every graph layer and the GCN model.
#include <gtest/gtest.h>

#include "tessera/tessera.hpp"
#include "unit/gradient_check.hpp"

namespace tessera {
namespace {

using testing::check_module;
using testing::cpu;
using testing::dot;
using testing::expect_gradient_matches;
using testing::Matrix;
using testing::random_matrix;

/// Â of a small irregular graph (with an isolated node) in float64.
CsrT<double> small_normalized_graph() {
  graph::EdgeList edges;
  edges.num_nodes = 7;
  for (auto [u, v] : {std::pair{0, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {1, 5}}) {
    edges.add(u, v);
  }
  return graph::gcn_normalize(graph::build_symmetric_csr(cpu(), edges)).cast<double>();
}

/// A CSR [rows.size(), cols] from per-row (column, value) lists with ascending columns.
CsrT<double> csr_from_rows(std::int64_t cols,
                           const std::vector<std::vector<std::pair<LocalId, double>>>& rows) {
  std::int64_t nnz = 0;
  for (const auto& row : rows) nnz += static_cast<std::int64_t>(row.size());
  CsrT<double> out(cpu(), static_cast<std::int64_t>(rows.size()), cols, nnz);
  Offset k = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (const auto& [c, v] : rows[r]) {
      out.col()[k] = c;
      out.val()[k++] = v;
    }
    out.row_ptr()[r + 1] = k;
  }
  return out;
}

TEST(GradientCheck, GcnConvTransformFirstMatchesFiniteDifferences) {
  const CsrT<double> a = small_normalized_graph();
  GcnConv<double> conv(cpu(), a, a, 5, 3, true, 1, 0, GcnOrder::TransformThenAggregate);
  Matrix x = random_matrix(7, 5, 1);

  check_module(conv, x, 3, Step{});
}

TEST(GradientCheck, GcnConvAggregateFirstMatchesFiniteDifferences) {
  const CsrT<double> a = small_normalized_graph();
  GcnConv<double> conv(cpu(), a, a, 3, 5, true, 1, 0, GcnOrder::AggregateThenTransform);
  Matrix x = random_matrix(7, 3, 2);

  check_module(conv, x, 5, Step{});
}

TEST(GradientCheck, GcnConvWithNonSymmetricAdjacencyUsesTranspose) {
  CsrT<double> a = small_normalized_graph();
  for (std::int64_t k = 0; k < a.nnz(); ++k) a.val()[k] *= 1.0 + 0.1 * static_cast<double>(k % 3);
  const CsrT<double> at = graph::transpose(a);
  GcnConv<double> conv(cpu(), a, at, 4, 2, false, 3, 1);
  Matrix x = random_matrix(7, 4, 3);

  check_module(conv, x, 2, Step{});
}

TEST(GradientCheck, GcnConvWithSparseInputMatchesFiniteDifferencesForWeights) {
  const CsrT<double> a = small_normalized_graph();
  GcnConv<double> conv(cpu(), a, a, 6, 2, true, 4, 0);
  // A 7x6 sparse input with an empty row (row 3).
  const CsrT<double> features = csr_from_rows(
      6, {{{0, 0.5}, {3, 1.0}}, {{5, 0.75}}, {{1, 1.5}, {2, 0.25}}, {}, {{4, 2.0}}, {{0, 1.0}}, {{5, 0.5}}});
  const Matrix r = random_matrix(7, 2, 5);
  const auto objective = [&] {
    return dot(conv.forward(Step{}, Input<double>(features.view())).output.dense, r.cview());
  };

  const Context<double> ctx = conv.forward(Step{}, Input<double>(features.view()));
  conv.backward(ctx, r.cview(), GradientMode::Ignore, GradientMode::Overwrite);

  for (Parameter<double>* p : conv.parameters()) {
    Matrix grad(cpu(), p->grad.rows(), p->grad.cols());
    std::copy(p->grad.data(), p->grad.data() + p->grad.size(), grad.data());
    expect_gradient_matches(objective, p->value.data(), p->value.size(), grad.data(), p->name);
  }
}

/// M = D⁻¹A of the small graph and its transpose (M is not symmetric), in float64.
std::pair<CsrT<double>, CsrT<double>> small_mean_aggregation() {
  graph::EdgeList edges;
  edges.num_nodes = 7;  // node 6 is isolated: its row aggregates zero
  for (auto [u, v] : {std::pair{0, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {1, 5}}) {
    edges.add(u, v);
  }
  const Csr m = graph::mean_aggregation(graph::build_symmetric_csr(cpu(), edges));
  return {m.cast<double>(), graph::transpose(m).cast<double>()};
}

TEST(GradientCheck, SageConvBothOrdersMatchFiniteDifferences) {
  const auto [m, mt] = small_mean_aggregation();
  for (const GcnOrder order : {GcnOrder::TransformThenAggregate, GcnOrder::AggregateThenTransform}) {
    SageConv<double> sage(cpu(), m, mt, 4, 3, true, 5, 0, order);
    Matrix x = random_matrix(7, 4, 6);

    SCOPED_TRACE(sage.name());
    check_module(sage, x, 3, Step{});
  }
}

TEST(GradientCheck, SageConvWithSparseInputMatchesFiniteDifferencesForWeights) {
  const auto [m, mt] = small_mean_aggregation();
  SageConv<double> sage(cpu(), m, mt, 6, 2, false, 7, 1);
  const CsrT<double> features = csr_from_rows(
      6, {{{0, 0.5}, {3, 1.0}}, {{5, 0.75}}, {{1, 1.5}, {2, 0.25}}, {}, {{4, 2.0}}, {{0, 1.0}}, {{5, 0.5}}});
  const Matrix r = random_matrix(7, 2, 8);
  const auto objective = [&] {
    return dot(sage.forward(Step{}, Input<double>(features.view())).output.dense, r.cview());
  };

  sage.backward(sage.forward(Step{}, Input<double>(features.view())), r.cview(),
                GradientMode::Ignore, GradientMode::Overwrite);

  for (Parameter<double>* p : sage.parameters()) {
    const std::vector<double> grad(p->grad.data(), p->grad.data() + p->grad.size());
    expect_gradient_matches(objective, p->value.data(), p->value.size(), grad.data(), p->name);
  }
}

TEST(GradientCheck, GinAggregateMatchesFiniteDifferencesIncludingEpsilon) {
  graph::EdgeList edges;
  edges.num_nodes = 6;
  for (auto [u, v] : {std::pair{0, 1}, {1, 2}, {2, 3}, {0, 3}, {4, 5}}) edges.add(u, v);
  const CsrT<double> a = graph::build_symmetric_csr(cpu(), edges).cast<double>();
  GinAggregate<double> gin(cpu(), a, a, 3, 0.25, 0);
  Matrix x = random_matrix(6, 3, 9);

  check_module(gin, x, 3, Step{});
}

TEST(GradientCheck, GinAggregateWithBiasMatchesFiniteDifferences) {
  graph::EdgeList edges;
  edges.num_nodes = 5;
  for (auto [u, v] : {std::pair{0, 1}, {1, 2}, {2, 3}, {3, 4}, {0, 4}, {1, 3}}) edges.add(u, v);
  const CsrT<double> a = graph::build_symmetric_csr(cpu(), edges).cast<double>();
  GinAggregate<double> gin(cpu(), a, a, 4, -0.1, 1, true);
  ASSERT_EQ(gin.parameters().size(), 2u);
  Matrix x = random_matrix(5, 4, 13);

  check_module(gin, x, 4, Step{});
}

TEST(GradientCheck, TwoLayerGcnModelMatchesFiniteDifferences) {
  const CsrT<double> a = small_normalized_graph();
  gnn::ModelSpec spec{{5, 4, 3}, {}, 11};
  spec.config.dropout = 0.3f;
  Sequential<double> model = gnn::build_gcn(cpu(), a, a, spec);
  const Matrix x = random_matrix(7, 5, 12);
  const Matrix r = random_matrix(7, 3, 13);
  const Step step{5, 1, true, {}};
  const auto objective = [&] { return dot(model.forward(step, x.cview()), r.cview()); };

  model.forward(step, x.cview());
  model.backward(r.cview());

  for (Parameter<double>* p : model.parameters()) {
    Matrix grad(cpu(), p->grad.rows(), p->grad.cols());
    std::copy(p->grad.data(), p->grad.data() + p->grad.size(), grad.data());
    expect_gradient_matches(objective, p->value.data(), p->value.size(), grad.data(), p->name);
  }
}

}  // namespace
}  // namespace tessera
