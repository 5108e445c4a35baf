// Finite-difference gradient checks in float64 for every graph layer and the GCN model, and the
// GCN layer in row blocks and tiles (under a tiny memory budget) against the whole layer.
#include "tessera/engine/row_blocks.hpp"
#include "tessera/tessera.hpp"
#include "unit/gradient_check.hpp"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <memory>

namespace tessera {
namespace {

using testing::check_module;
using testing::cpu;
using testing::dot;
using testing::expect_parameter_gradients_match;
using testing::Matrix;
using testing::random_matrix;

/// A small irregular graph on 7 nodes; node 6 is isolated.
Csr small_graph() {
  graph::EdgeList edges;
  edges.num_nodes = 7;
  for (auto [u, v] : {std::pair{0, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {1, 5}}) {
    edges.add(u, v);
  }
  return graph::build_symmetric_csr(cpu(), edges);
}

/// Â of small_graph() in float64.
CsrT<double> small_normalized_graph() {
  return graph::gcn_normalize(small_graph()).cast<double>();
}

/// A CSR [rows.size(), cols] from per-row (column, value) lists with ascending columns.
CsrT<double> csr_from_rows(std::int64_t cols,
                           const std::vector<std::vector<std::pair<LocalId, double>>>& rows) {
  std::int64_t nnz = 0;
  for (const auto& row : rows)
    nnz += static_cast<std::int64_t>(row.size());
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

/// A 7x6 sparse input with an empty row (row 3).
CsrT<double> sparse_input() {
  return csr_from_rows(6, {{{0, 0.5}, {3, 1.0}},
                           {{5, 0.75}},
                           {{1, 1.5}, {2, 0.25}},
                           {},
                           {{4, 2.0}},
                           {{0, 1.0}},
                           {{5, 0.5}}});
}

/// The weight gradients of `layer` on a sparse input (which has none of its own) against
/// finite differences.
void check_weights_on_sparse_input(Module<double>& layer, std::int64_t out_cols, unsigned seed) {
  const CsrT<double> features = sparse_input();
  const Matrix r = random_matrix(features.rows(), out_cols, seed);
  const auto objective = [&] {
    return dot(layer.forward(Step{}, Input<double>(features.view())).output.dense, r.cview());
  };

  const Context<double> ctx = layer.forward(Step{}, Input<double>(features.view()));
  layer.backward(ctx, r.cview(), GradientMode::Ignore, GradientMode::Overwrite);

  expect_parameter_gradients_match(objective, layer.parameters());
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
  for (std::int64_t k = 0; k < a.nnz(); ++k)
    a.val()[k] *= 1.0 + 0.1 * static_cast<double>(k % 3);
  const CsrT<double> at = graph::transpose(a);
  GcnConv<double> conv(cpu(), a, at, 4, 2, false, 3, 1);
  Matrix x = random_matrix(7, 4, 3);

  check_module(conv, x, 2, Step{});
}

TEST(GradientCheck, GcnConvWithSparseInputMatchesFiniteDifferencesForWeights) {
  const CsrT<double> a = small_normalized_graph();
  GcnConv<double> conv(cpu(), a, a, 6, 2, true, 4, 0);

  check_weights_on_sparse_input(conv, 2, 5);
}

/// Reads a tensor wherever it lives (through its backend: a chunk manager brings it in).
std::vector<double> read_back(const DenseT<double>& t) {
  std::vector<double> host(static_cast<std::size_t>(t.size()));
  t.backend()->copy_to_host(host.data(), t.data(), t.bytes());
  return host;
}

void expect_near_all(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-12 * (1.0 + std::abs(a[i]))) << what << " [" << i << "]";
}

using GraphLayerMaker = std::function<std::unique_ptr<Module<double>>(
    BackendPtr, const CsrT<double>&, const CsrT<double>&, GcnOrder)>;

/// Linear(5 -> 4) → the layer (4 -> `out`) over 300 nodes and a non-symmetric S (so Sᵀ has tiles of
/// its own), whole and under 64 KiB, where the layer must run in row blocks and tiles (2-3 per
/// dimension) and the Linear runs whole; the Linear makes the layer's input gradient count.
/// Outputs and parameter gradients (accumulated over two backwards) agree within 1e-12.
void expect_tiled_layer_computes_the_whole_layer(const GraphLayerMaker& make_layer,
                                                 std::int64_t out = 3,
                                                 std::vector<GcnOrder> orders = {
                                                     GcnOrder::TransformThenAggregate,
                                                     GcnOrder::AggregateThenTransform}) {
  graph::EdgeList edges;
  edges.num_nodes = 300;
  for (GlobalId u = 0; u < 300; ++u) {
    edges.add(u, (u * 7 + 3) % 300);
    edges.add(u, (u * u + 11) % 300);
  }
  CsrT<double> a = graph::gcn_normalize(graph::build_symmetric_csr(cpu(), edges)).cast<double>();
  for (std::int64_t k = 0; k < a.nnz(); ++k)
    a.val()[k] *= 1.0 + 0.1 * static_cast<double>(k % 5);
  const CsrT<double> at = graph::transpose(a);
  const Matrix x = random_matrix(300, 5, 7);
  const Matrix d_out = random_matrix(300, out, 8);

  // The tiles are cut on the host; that must not leave OpenMP at one thread (it once did:
  // every budgeted epoch after it ran on one core).
  const BackendPtr two_threads = make_cpu_backend(2);
  for (const GcnOrder order : orders) {
    SCOPED_TRACE(order == GcnOrder::AggregateThenTransform   ? "aggregate first"
                 : order == GcnOrder::TransformThenAggregate ? "transform first"
                                                             : "one order");
    OffloadConfig config;
    config.chunk_bytes = std::size_t{4} << 10;
    config.device_bytes = std::size_t{64} << 10;
    ChunkManager memory(cpu(), config);
    const BackendPtr managed = memory.allocator(TensorKind::Activation);
    const CsrT<double> am = to_backend(a, memory.allocator(TensorKind::Matrix));
    const CsrT<double> atm = to_backend(at, memory.allocator(TensorKind::Matrix));
    Sequential<double> whole, tiled;
    whole.add(std::make_unique<Linear<double>>(cpu(), 5, 4, true, 3, 0));
    whole.add(make_layer(cpu(), a, at, order));
    tiled.add(std::make_unique<Linear<double>>(managed, 5, 4, true, 3, 0));
    tiled.add(make_layer(managed, am, atm, order));
    tiled.use_memory(&memory);
    ASSERT_TRUE(tiled.modules()[1]->acquires_own_memory(
        memory, Input<double>(ConstDenseView<double>(x.data(), 300, 4))));

    for (Sequential<double>* model : {&whole, &tiled}) {
      for (const GradientMode mode : {GradientMode::Overwrite, GradientMode::Accumulate}) {
        model->forward(Step{}, Input<double>(x.cview()));
        model->backward(d_out.cview(), mode);
      }
    }
    const ConstDenseView<double> y_whole = whole.forward(Step{}, Input<double>(x.cview()));
    const ConstDenseView<double> y_tiled = tiled.forward(Step{}, Input<double>(x.cview()));

    std::vector<double> tiled_y(static_cast<std::size_t>(y_tiled.size()));
    managed->copy_to_host(tiled_y.data(), y_tiled.data, tiled_y.size() * sizeof(double));
    expect_near_all(std::vector<double>(y_whole.data, y_whole.data + y_whole.size()), tiled_y,
                    "output");
    const auto pw = whole.parameters(), pt = tiled.parameters();
    ASSERT_EQ(pw.size(), pt.size());
    for (std::size_t i = 0; i < pw.size(); ++i) {
      expect_near_all(read_back(pw[i]->grad), read_back(pt[i]->grad), pw[i]->name.c_str());
    }
    EXPECT_GT(memory.total().device_to_host_bytes + memory.total().dropped_bytes, 0u);
    EXPECT_LE(memory.total().peak_device_bytes, config.device_bytes);
    EXPECT_EQ(two_threads->num_threads(), 2);
  }
}

TEST(TiledGcnConv, UnderATinyBudgetComputesWhatTheWholeLayerComputes) {
  expect_tiled_layer_computes_the_whole_layer([](BackendPtr backend, const CsrT<double>& s,
                                                 const CsrT<double>& s_t, GcnOrder order) {
    return std::make_unique<GcnConv<double>>(std::move(backend), s, s_t, 4, 3, true, 3, 1, order);
  });
}

TEST(GradientCheck, GcnConvWithFusedReluDropoutMatchesFiniteDifferencesInBothOrders) {
  const CsrT<double> a = small_normalized_graph();
  const Step step{42, 3, true, {}};
  for (const GcnOrder order :
       {GcnOrder::TransformThenAggregate, GcnOrder::AggregateThenTransform}) {
    GcnConv<double> conv(cpu(), a, a, 4, 6, true, 1, 0, order, {true, 0.4f, 1});
    Matrix x = random_matrix(7, 4, 21);

    check_module(conv, x, 6, step);
  }
}

TEST(GcnConv, RefusesADropoutProbabilityOutsideZeroToOne) {
  const CsrT<double> a = small_normalized_graph();
  for (const float p : {-0.1f, 1.0f, std::nanf("")}) {
    EXPECT_THROW(GcnConv<double>(cpu(), a, a, 4, 6, true, 1, 0, GcnOrder::Auto, {true, p, 1}),
                 InvalidArgument);
  }
}

/// The activation a layer fuses (bias, ReLU and dropout in the cache blocks of its product)
/// computes what the separate ReLU+Dropout module after it computes: outputs and gradients of
/// GCNConv + activation against GCNConv → ReluDropout, both orders, over more than one cache
/// block (3000 rows of 192 float64: 1365 rows a block), a Linear before so the input gradient
/// counts.
TEST(GcnConv, FusedActivationComputesWhatTheSeparateReluDropoutComputes) {
  graph::EdgeList edges;
  edges.num_nodes = 3000;
  for (GlobalId u = 0; u < 3000; ++u) {
    edges.add(u, (u * 7 + 3) % 3000);
    edges.add(u, (u * u + 11) % 3000);
  }
  const CsrT<double> a =
      graph::gcn_normalize(graph::build_symmetric_csr(cpu(), edges)).cast<double>();
  const Matrix x = random_matrix(3000, 16, 31);
  const Matrix d_out = random_matrix(3000, 192, 32);
  const Step step{7, 2, true, {}};
  for (const GcnOrder order :
       {GcnOrder::TransformThenAggregate, GcnOrder::AggregateThenTransform}) {
    SCOPED_TRACE(to_string(order));
    Sequential<double> fused, separate;
    fused.add(std::make_unique<Linear<double>>(cpu(), 16, 24, true, 3, 0));
    fused.add(std::make_unique<GcnConv<double>>(cpu(), a, a, 24, 192, true, 3, 1, order,
                                                GcnActivation{true, 0.5f, 2}));
    separate.add(std::make_unique<Linear<double>>(cpu(), 16, 24, true, 3, 0));
    separate.add(std::make_unique<GcnConv<double>>(cpu(), a, a, 24, 192, true, 3, 1, order));
    separate.add(std::make_unique<ReluDropout<double>>(cpu(), 0.5f, 2));
    ASSERT_TRUE(fused.modules()[1]->backward_reads_output());

    const ConstDenseView<double> y_fused = fused.forward(step, Input<double>(x.cview()));
    const ConstDenseView<double> y_separate = separate.forward(step, Input<double>(x.cview()));
    fused.backward(d_out.cview(), GradientMode::Overwrite);
    separate.backward(d_out.cview(), GradientMode::Overwrite);

    std::int64_t dropped = 0;
    for (std::int64_t i = 0; i < y_fused.size(); ++i) {
      ASSERT_NEAR(y_fused.data[i], y_separate.data[i], 1e-12 * (1.0 + std::abs(y_separate.data[i])))
          << "output [" << i << "]";
      dropped += y_separate.data[i] == 0.0 ? 1 : 0;
    }
    EXPECT_GT(dropped, y_fused.size() / 2); // ReLU and dropout both ran
    const auto pf = fused.parameters(), ps = separate.parameters();
    ASSERT_EQ(pf.size(), ps.size());
    for (std::size_t i = 0; i < pf.size(); ++i) {
      expect_near_all(read_back(ps[i]->grad), read_back(pf[i]->grad), ps[i]->name.c_str());
    }
    // Evaluation: ReLU only, in both.
    const ConstDenseView<double> e_fused = fused.forward(Step{}, Input<double>(x.cview()));
    const ConstDenseView<double> e_separate = separate.forward(Step{}, Input<double>(x.cview()));
    for (std::int64_t i = 0; i < e_fused.size(); ++i)
      ASSERT_NEAR(e_fused.data[i], e_separate.data[i],
                  1e-12 * (1.0 + std::abs(e_separate.data[i])));
  }
}

TEST(TiledGcnConvWithActivation, UnderATinyBudgetComputesWhatTheWholeLayerComputes) {
  expect_tiled_layer_computes_the_whole_layer(
      [](BackendPtr backend, const CsrT<double>& s, const CsrT<double>& s_t, GcnOrder order) {
        return std::make_unique<GcnConv<double>>(std::move(backend), s, s_t, 4, 3, true, 3, 1,
                                                 order, GcnActivation{true, 0.5f, 2});
      });
}

TEST(TiledSageConv, UnderATinyBudgetComputesWhatTheWholeLayerComputes) {
  expect_tiled_layer_computes_the_whole_layer([](BackendPtr backend, const CsrT<double>& s,
                                                 const CsrT<double>& s_t, GcnOrder order) {
    return std::make_unique<SageConv<double>>(std::move(backend), s, s_t, 4, 3, true, 3, 1, order);
  });
}

TEST(TiledGinAggregate, UnderATinyBudgetComputesWhatTheWholeLayerComputes) {
  expect_tiled_layer_computes_the_whole_layer(
      [](BackendPtr backend, const CsrT<double>& s, const CsrT<double>& s_t, GcnOrder) {
        return std::make_unique<GinAggregate<double>>(std::move(backend), s, s_t, 4, 0.25, 1, true);
      },
      4, {GcnOrder::Auto}); // GIN aggregates its input: one order
}

TEST(TiledAggregation, SkipsTilesWithoutEntriesAndStillWritesEveryRow) {
  // Under 64 KiB and x 16 wide the tiles are 128 rows by 64 columns. Rows [0, 128) read columns
  // [0, 100) (their last three column tiles are empty), rows [128, 256) nothing (every tile is
  // empty: the rows are zeros) and rows [256, 300) columns [280, 300) (their first tiles are
  // empty: the last one overwrites).
  std::vector<std::vector<LocalId>> columns(300);
  for (LocalId r = 0; r < 128; ++r)
    columns[r] = {r % 100, (3 * r + 1) % 100};
  for (LocalId r = 256; r < 300; ++r)
    columns[r] = {280 + r % 20};
  CsrT<double> s(cpu(), 300, 300, 128 * 2 + 44);
  s.row_ptr()[0] = 0;
  for (std::int64_t r = 0, k = 0; r < 300; ++r) {
    for (const LocalId c : columns[r]) {
      s.col()[k] = c;
      s.val()[k++] = 0.5 + 0.01 * static_cast<double>(c);
    }
    s.row_ptr()[r + 1] = k;
  }
  const CsrT<double> s_t = graph::transpose(s);
  const Matrix x = random_matrix(300, 16, 5);
  Matrix expected(cpu(), 300, 16);
  ops::spmm(*cpu(), s.view(), x.cview(), expected.view());
  OffloadConfig config;
  config.chunk_bytes = std::size_t{4} << 10;
  config.device_bytes = std::size_t{64} << 10;
  ChunkManager memory(cpu(), config);
  Aggregation<double> tiled(memory.allocator(TensorKind::Activation), s, s_t);
  Matrix y(cpu(), 300, 16);
  y.fill(std::nan(""));

  tiled.forward_tiled(Step{}, x.cview(), y.view());

  for (std::int64_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y.data()[i], expected.data()[i], 1e-12)
        << "row " << i / 16 << ", column " << i % 16;
}

/// M = D⁻¹A of small_graph() and its transpose (M is not symmetric), in float64; the isolated
/// node's row aggregates zero.
std::pair<CsrT<double>, CsrT<double>> small_mean_aggregation() {
  const Csr m = graph::mean_aggregation(small_graph());
  return {m.cast<double>(), graph::transpose(m).cast<double>()};
}

TEST(GradientCheck, SageConvBothOrdersMatchFiniteDifferences) {
  const auto [m, mt] = small_mean_aggregation();
  for (const GcnOrder order :
       {GcnOrder::TransformThenAggregate, GcnOrder::AggregateThenTransform}) {
    SageConv<double> sage(cpu(), m, mt, 4, 3, true, 5, 0, order);
    Matrix x = random_matrix(7, 4, 6);

    SCOPED_TRACE(sage.name());
    check_module(sage, x, 3, Step{});
  }
}

TEST(GradientCheck, SageConvWithSparseInputMatchesFiniteDifferencesForWeights) {
  const auto [m, mt] = small_mean_aggregation();
  SageConv<double> sage(cpu(), m, mt, 6, 2, false, 7, 1);

  check_weights_on_sparse_input(sage, 2, 8);
}

TEST(GradientCheck, GinAggregateMatchesFiniteDifferencesIncludingEpsilon) {
  graph::EdgeList edges;
  edges.num_nodes = 6;
  for (auto [u, v] : {std::pair{0, 1}, {1, 2}, {2, 3}, {0, 3}, {4, 5}})
    edges.add(u, v);
  const CsrT<double> a = graph::build_symmetric_csr(cpu(), edges).cast<double>();
  GinAggregate<double> gin(cpu(), a, a, 3, 0.25, 0);
  Matrix x = random_matrix(6, 3, 9);

  check_module(gin, x, 3, Step{});
}

TEST(GradientCheck, GinAggregateWithBiasMatchesFiniteDifferences) {
  graph::EdgeList edges;
  edges.num_nodes = 5;
  for (auto [u, v] : {std::pair{0, 1}, {1, 2}, {2, 3}, {3, 4}, {0, 4}, {1, 3}})
    edges.add(u, v);
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

  expect_parameter_gradients_match(objective, model.parameters());
}

} // namespace
} // namespace tessera
