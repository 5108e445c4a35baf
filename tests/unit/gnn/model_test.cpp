// Model shapes and the GCN builder, the model graph, and the aggregation's refusals.
#include "tessera/tessera.hpp"

#include <algorithm>
#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kEasySbm =
    "sbm:nodes=3000,classes=4,avg-degree=10,p-in=0.9,features=16,noise=1";

/// Â of the graph 0 - 1, 2 (an isolated node).
Csr three_node_gcn_matrix(const BackendPtr& cpu) {
  graph::EdgeList e;
  e.num_nodes = 3;
  e.add(0, 1);
  return graph::gcn_normalize(graph::build_symmetric_csr(cpu, e));
}

TEST(ModelShape, HiddenAndLayersResolveBetweenTheDatasWidths) {
  gnn::ModelShape shape;
  shape.hidden = 32;
  shape.num_layers = 3;

  EXPECT_EQ(shape.resolve(1433, 7), (std::vector<std::int64_t>{1433, 32, 32, 7}));
  shape.num_layers = 1;
  EXPECT_EQ(shape.resolve(1433, 7), (std::vector<std::int64_t>{1433, 7}));
}

TEST(ModelShape, ExplicitSizesWinAndMustFitTheData) {
  gnn::ModelShape shape;
  shape.layer_sizes = {10, 64, 4};
  shape.hidden = 8; // ignored: the sizes say it

  EXPECT_EQ(shape.resolve(10, 4), (std::vector<std::int64_t>{10, 64, 4}));
  EXPECT_THAT([&] { shape.resolve(16, 4); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  HasSubstr("layer sizes 10-64-4 must start at the 16 input features")));
}

TEST(ModelShape, NoLayerIsRefused) {
  gnn::ModelShape shape;
  shape.num_layers = 0;

  EXPECT_THROW(shape.resolve(10, 4), InvalidArgument);
}

TEST(GcnOrder, NamesReadBack) {
  for (const GcnOrder order :
       {GcnOrder::Auto, GcnOrder::AggregateThenTransform, GcnOrder::TransformThenAggregate}) {
    EXPECT_EQ(parse_gcn_order(to_string(order)), order);
  }
  EXPECT_THROW(parse_gcn_order("sideways"), InvalidArgument);
}

TEST(BuildGcn, StacksDropoutAndConvsWithFusedReluDropoutAndPicksTheNarrowerOrder) {
  const BackendPtr cpu = make_cpu_backend();
  const Csr a = three_node_gcn_matrix(cpu);
  const gnn::ModelSpec spec{{8, 16, 3}, {}, 0};

  Sequential<float> model = gnn::build_gcn(cpu, a, a, spec);

  ASSERT_EQ(model.modules().size(), 3u);
  EXPECT_THAT(model.modules()[0]->name(), HasSubstr("Dropout"));
  EXPECT_THAT(model.modules()[1]->name(), HasSubstr("8 -> 16, aggregate-first) + ReLU + Dropout"));
  EXPECT_THAT(model.modules()[2]->name(), HasSubstr("16 -> 3, transform-first)"));
  EXPECT_THAT(model.modules()[2]->name(), Not(HasSubstr("ReLU")));
  EXPECT_EQ(model.num_parameters(), 8 * 16 + 16 + 16 * 3 + 3);
}

TEST(BuildGcn, AScheduleOrderPerLayerOverridesTheConfiguredOne) {
  // A scheduler's plan gives the first layer the wider order; the second has no entry and takes
  // the configured rule.
  const BackendPtr cpu = make_cpu_backend();
  const Csr a = three_node_gcn_matrix(cpu);
  gnn::ModelSpec spec{{8, 16, 3}, {}, 0};
  spec.layer_orders = {GcnOrder::TransformThenAggregate};

  Sequential<float> model = gnn::build_gcn(cpu, a, a, spec);

  EXPECT_EQ(spec.order_of(0), GcnOrder::TransformThenAggregate);
  EXPECT_EQ(spec.order_of(1), GcnOrder::Auto);
  EXPECT_THAT(model.modules()[1]->name(), HasSubstr("8 -> 16, transform-first"));
  EXPECT_THAT(model.modules()[2]->name(), HasSubstr("16 -> 3, transform-first"));
}

TEST(MeasureRankRates, ARankWithoutRowsMeetsEveryTimingOfARankWithRows) {
  // `together` is a barrier in a job: a rank whose tile has no rows must call it exactly as
  // often as the others, or the job hangs.
  const BackendPtr cpu = make_cpu_backend(1);
  const Csr a = three_node_gcn_matrix(cpu);
  graph::EdgeList none;
  const Csr empty = graph::gcn_normalize(graph::build_symmetric_csr(cpu, none));
  gnn::LayerShape first, second;
  first.in = 8;
  first.out = 16;
  first.transform_first = false;
  first.input_gradient = false;
  first.input_rows = 3;
  second.in = 16;
  second.out = 3;
  second.input_rows = 3;
  const gnn::LayerShape layers[] = {first, second};
  int with_rows = 0, without = 0;

  const gnn::RankRates rates = gnn::measure_rank_rates(cpu, a, layers, [&] { ++with_rows; });
  const gnn::RankRates idle = gnn::measure_rank_rates(cpu, empty, layers, [&] { ++without; });

  EXPECT_GT(with_rows, 0);
  EXPECT_EQ(without, with_rows);
  EXPECT_EQ(rates.spmm_gbps.size(), 2u); // widths 8 (aggregate-first) and 3 (transform-first)
  EXPECT_EQ(rates.gemms.size(), 2u);
  EXPECT_GT(rates.gemm_gflops, 0.0);
  EXPECT_TRUE(idle.spmm_gbps.empty());
  EXPECT_TRUE(idle.gemms.empty());
}

TEST(PredictPartCost, SplitsAStepIntoWhatNonzerosAndRowsCost) {
  // Fixed rates: SpMM at 10 GB/s, GEMMs at 50 GFLOP/s, copies at 20 GB/s.
  gnn::RankRates rates;
  rates.spmm_gbps = {{16, 10.0}};
  rates.gemm_gflops = 50.0;
  rates.copy_gbps = 20.0;
  gnn::LayerShape layer;
  layer.in = 64;
  layer.out = 16;
  layer.input_rows = 1000;
  const gnn::LayerShape layers[] = {layer};

  const gnn::PartCost cost = gnn::predict_part_cost(rates, layers, 1000, 8000);
  const gnn::CostModel model(rates, {}, nullptr, 1000, 1000, 1000, 8000);

  // SpMM forward and backward read a 16-wide row (64 bytes) and an index and value (8) per
  // nonzero at 10 GB/s.
  EXPECT_NEAR(cost.per_nonzero_ms, 2 * (8.0 + 64.0) / 10e9 * 1e3, 1e-12);
  EXPECT_GT(cost.per_row_ms, 0.0);
  EXPECT_NEAR(cost.per_nonzero_ms * 8000 + cost.per_row_ms * 1000,
              model.predict(layer, comm::ExchangeOptions{}).compute_ms, 1e-9);
  EXPECT_NEAR(cost.row_cost(), cost.per_row_ms / cost.per_nonzero_ms, 1e-12);
  EXPECT_EQ(gnn::predict_part_cost(rates, layers, 0, 0).per_nonzero_ms, 0.0);
}

TEST(PredictLayer, WaitsForWhatTheRowsWithoutGhostsDoNotHide) {
  // SpMM at 10 GB/s; 600 of 1000 owned rows are interior, 200 ghost rows.
  gnn::RankRates rates;
  rates.spmm_gbps = {{16, 10.0}};
  rates.gemm_gflops = 50.0;
  rates.copy_gbps = 20.0;
  gnn::LayerShape layer;
  layer.in = 32;
  layer.out = 16;
  layer.has_halo = true;
  layer.input_rows = 1000;
  const gnn::PartCounts part{1000, 1200, 600, 8000, 150};
  const comm::ExchangeOptions exact;

  const gnn::LayerPrediction fast =
      gnn::predict_layer(rates, part, layer, exact, [](std::int64_t) { return 0.0; });
  const gnn::LayerPrediction slow =
      gnn::predict_layer(rates, part, layer, exact, [](std::int64_t) { return 1.0; });

  // Forward, the interior rows' SpMM hides the gather; backward, the owned rows' the scatter-add.
  const double hidden = (0.6 * spmm_model_bytes(1000, 8000, 16) +
                         spmm_model_bytes(1200, 8000, 16) * 1000.0 / 1200.0) /
                        10e9;
  EXPECT_EQ(fast.wait_ms, 0.0);
  EXPECT_EQ(slow.compute_ms, fast.compute_ms);
  EXPECT_NEAR(slow.transfer_ms, 2e3, 1e-9);
  EXPECT_NEAR(slow.wait_ms, 1e3 * (2.0 - hidden), 1e-9);
}

TEST(BuildGcn, DecaysTheFirstLayerOnlyOrEveryLayerAsConfigured) {
  const BackendPtr cpu = make_cpu_backend();
  const Csr a = three_node_gcn_matrix(cpu);
  gnn::ModelSpec spec{{8, 16, 3}, {}, 0};
  const auto decays = [&] {
    std::vector<bool> out;
    Sequential<float> model = gnn::build_gcn(cpu, a, a, spec);
    for (const Parameter<float>* p : model.parameters())
      out.push_back(p->decay);
    return out;
  };

  EXPECT_EQ(decays(), (std::vector<bool>{true, true, false, false})); // W0, b0, W1, b1
  spec.config.decay_first_layer_only = false;
  EXPECT_EQ(decays(), (std::vector<bool>{true, true, true, true}));
}

TEST(ModelGraph, BuildsEachAggregationOnceAndHasNoHaloOnOneProcess) {
  const auto cpu = make_cpu_backend(1);
  auto data = datasets::load_dataset(cpu, kEasySbm, {});
  const std::int64_t n = data.num_nodes;
  gnn::ModelGraph graph(cpu, std::move(data.adjacency), 16, 4);

  const Csr& gcn = graph.matrix(gnn::AggregationKind::Gcn);
  EXPECT_EQ(&graph.matrix(gnn::AggregationKind::Gcn), &gcn);
  EXPECT_EQ(&graph.transpose(gnn::AggregationKind::Gcn), &gcn); // symmetric on one process
  const Csr& mean = graph.matrix(gnn::AggregationKind::Mean);
  EXPECT_NE(&graph.transpose(gnn::AggregationKind::Mean), &mean);
  EXPECT_EQ(graph.transpose(gnn::AggregationKind::Mean).rows(), n);
  EXPECT_EQ(graph.halo(0), nullptr);
  EXPECT_EQ(graph.halo(1), nullptr);
  EXPECT_EQ(graph.input_rows(), n);

  graph.release_adjacency();
  EXPECT_THAT([&] { graph.matrix(gnn::AggregationKind::Sum); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("adjacency was released")));
}

TEST(ModelGraph, TheOneTileOfAOneRankJobIsTheWholeGraph) {
  // The tile constructor on one rank: no exchange at any layer, with or without the cache, and
  // the same Â as the one-process constructor (tile normalization with global degrees).
  const auto cpu = make_cpu_backend(1);
  const auto comm = comm::make_self_communicator();
  auto data = datasets::load_dataset(cpu, kEasySbm, {});
  const Csr whole = graph::gcn_normalize(data.adjacency);
  partition::LocalGraph tile = partition::whole_graph_tile(std::move(data));
  const auto plan = std::make_shared<const comm::HaloPlan>(
      comm::HaloPlan::build(*comm, tile.owned_ids, tile.ghost_ids, tile.ghost_owner));

  for (const bool cached : {false, true}) {
    gnn::ModelGraph graph(cpu, tile.adjacency.cast<float>(), tile.degree, 16, 4, comm, plan,
                          tile.n_owned(), cached);

    EXPECT_FALSE(graph.distributed());
    EXPECT_EQ(graph.halo(0), nullptr);
    EXPECT_EQ(graph.halo(1), nullptr);
    const Csr& gcn = graph.matrix(gnn::AggregationKind::Gcn);
    EXPECT_EQ(&graph.transpose(gnn::AggregationKind::Gcn), &gcn);
    ASSERT_EQ(gcn.nnz(), whole.nnz());
    for (std::int64_t k = 0; k < gcn.nnz(); ++k) {
      ASSERT_EQ(gcn.col()[k], whole.col()[k]) << k;
      ASSERT_NEAR(gcn.val()[k], whole.val()[k], 1e-6f * whole.val()[k]) << k;
    }
  }
}

/// The easy SBM graph (16 features, 4 classes) to build residual models on.
class BuildResidual : public ::testing::Test {
protected:
  BuildResidual() : graph(cpu, datasets::load_dataset(cpu, kEasySbm, {}).adjacency, 16, 4) {}
  BackendPtr cpu = make_cpu_backend(1);
  gnn::ModelGraph graph;
};

TEST_F(BuildResidual, TheFanInStartDrawsEveryLayerAsPyTorchsLinearAndLeavesTheNormsAlone) {
  // Features 16, width 8, 4 classes: every weight and bias within ±1/√fan_in and filling most of
  // it (PyTorch's nn.Linear start), GraphSAGE's fan-in its self and neighbour rows together; the
  // LayerNorms at gamma 1, beta 0. The Glorot start of the same model differs.
  gnn::ModelSpec spec;
  spec.layer_sizes = {16, 8, 8, 4};
  spec.seed = 3;
  spec.config.heads = 2;
  for (const gnn::ModelKind kind :
       {gnn::ModelKind::Gcn, gnn::ModelKind::Sage, gnn::ModelKind::Gat, gnn::ModelKind::Mlp}) {
    SCOPED_TRACE(gnn::display_name(kind));
    spec.config.init = gnn::WeightInit::FanIn;
    Sequential<float> model = gnn::build_residual(graph, spec, kind);
    spec.config.init = gnn::WeightInit::Glorot;
    Sequential<float> glorot = gnn::build_residual(graph, spec, kind);
    const auto params = model.parameters();
    const auto glorot_params = glorot.parameters();
    ASSERT_EQ(params.size(), glorot_params.size());
    int drawn = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Parameter<float>& p = *params[i];
      SCOPED_TRACE(p.name);
      const std::vector<float> v(p.value.data(), p.value.data() + p.value.size());
      const DenseT<float>& other = glorot_params[i]->value;
      const std::vector<float> g(other.data(), other.data() + other.size());
      if (p.name.find(".norm.") != std::string::npos) {
        const float expected = p.name.ends_with(".gamma") ? 1.0f : 0.0f;
        EXPECT_THAT(v, ::testing::Each(expected));
        EXPECT_EQ(v, g);
        continue;
      }
      const std::int64_t fan_in = p.name == "linear4096.weight" || p.name == "linear4096.bias" ? 16
                                  : p.name.starts_with("sage")                                 ? 16
                                                                                               : 8;
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      double largest = 0;
      for (const float x : v)
        largest = std::max(largest, static_cast<double>(std::abs(x)));
      EXPECT_LE(largest, bound);
      EXPECT_GE(largest, 0.5 * bound);
      EXPECT_NE(v, g);
      ++drawn;
    }
    EXPECT_GE(drawn, 8);
  }
}

TEST_F(BuildResidual, OneLogitEndsTwoClassesInLinearToOneAndTheBinaryHead) {
  gnn::ModelSpec spec;
  spec.layer_sizes = {16, 8, 2};
  spec.config.one_logit = true;
  Sequential<float> model = gnn::build_residual(graph, spec, gnn::ModelKind::Gcn);
  const auto& modules = model.modules();
  ASSERT_GE(modules.size(), 2u);
  EXPECT_EQ(modules.back()->name(), "BinaryLogit([0, z])");
  EXPECT_EQ(modules[modules.size() - 2]->name(), "Linear(8 -> 1)");
  spec.layer_sizes = {16, 8, 4};
  EXPECT_THAT([&] { gnn::build_residual(graph, spec, gnn::ModelKind::Gcn); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  HasSubstr("one output logit is for two classes; the data has 4")));
}

TEST_F(BuildResidual, OnlyTheResidualBuilderTakesTheFanInStart) {
  gnn::ModelSpec spec;
  spec.layer_sizes = {16, 8, 4};
  spec.config.init = gnn::WeightInit::FanIn;
  for (const gnn::ModelKind kind : {gnn::ModelKind::Gcn, gnn::ModelKind::Sage, gnn::ModelKind::Gin,
                                    gnn::ModelKind::Gat, gnn::ModelKind::Mlp}) {
    EXPECT_THAT([&] { gnn::builder_for(kind)(graph, spec); },
                ::testing::ThrowsMessage<InvalidArgument>(
                    AllOf(HasSubstr("draws Glorot weights"), HasSubstr("fan-in"))))
        << gnn::display_name(kind);
  }
  spec.config.init = gnn::WeightInit::Glorot;
  spec.config.one_logit = true;
  EXPECT_THAT([&] { gnn::build_gat(graph, spec); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("one output logit")));
  EXPECT_EQ(gnn::parse_weight_init("fan-in"), gnn::WeightInit::FanIn);
  EXPECT_EQ(gnn::to_string(gnn::parse_weight_init("glorot")), "glorot");
  EXPECT_THAT([] { gnn::parse_weight_init("xavier"); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("valid: glorot, fan-in")));
}

TEST(SageConv, EvaluationInBlocksOfRowsGivesTheWholeProductsOutputAndKeepsNoWholeProduct) {
  // 10,000 rows: three blocks of the evaluation path. Aggregate-first (in = out), with bias.
  const auto cpu = make_cpu_backend(1);
  const auto data = datasets::load_dataset(
      cpu, "sbm:nodes=10000,classes=4,avg-degree=10,p-in=0.9,features=16,noise=1", {});
  const Csr m = graph::mean_aggregation(data.adjacency);
  const Csr m_t = graph::transpose(m);
  SageConv<float> trained(cpu, m, m_t, 16, 16, true, 5, 0, GcnOrder::AggregateThenTransform);
  SageConv<float> evaluated(cpu, m, m_t, 16, 16, true, 5, 0, GcnOrder::AggregateThenTransform);
  const Input<float> x(data.features.dense->cview());
  // Training keeps S·x whole (its backward reads it); evaluating does not.
  const Context<float> whole = trained.forward(Step{1, 1, true, {}}, x);
  const Context<float> blocks = evaluated.forward(Step{1, 1, false, {}}, x);
  ASSERT_EQ(blocks.output.rows(), whole.output.rows());
  for (std::int64_t r = 0; r < whole.output.rows(); ++r) {
    for (std::int64_t c = 0; c < whole.output.cols(); ++c) {
      ASSERT_NEAR(blocks.output.dense(r, c), whole.output.dense(r, c),
                  1e-5f * (1.0f + std::abs(whole.output.dense(r, c))))
          << "row " << r << ", column " << c;
    }
  }
  const std::size_t whole_product = 10000 * 16 * sizeof(float);
  EXPECT_GE(trained.bytes() - evaluated.bytes(), whole_product - 4096 * 16 * sizeof(float))
      << "evaluation kept S·x whole";
}

TEST(Aggregation, InputOfTheWrongRowCountIsRefusedWithTheShapes) {
  const auto cpu = make_cpu_backend(1);
  const auto data = datasets::load_dataset(cpu, kEasySbm, {});
  const Csr a = graph::gcn_normalize(data.adjacency);
  Aggregation<float> aggregation(cpu, a, a);
  Dense x = Dense::zeros(cpu, 10, 3), y = Dense::zeros(cpu, a.rows(), 3);

  EXPECT_THAT([&] { aggregation.forward(Step{}, x.cview(), y.view()); },
              ::testing::ThrowsMessage<DimensionMismatch>(HasSubstr("[10, 3]")));
}

} // namespace
} // namespace tessera
