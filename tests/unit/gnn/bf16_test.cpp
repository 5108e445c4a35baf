// GCNConv with what it aggregates stored in bfloat16 (--activation-dtype bf16): the float32
// layer computed over the rounded values, forward and backward, in both product orders and over
// several cache blocks; the refusals.
#include "tessera/tessera.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

const BackendPtr& cpu() {
  static const BackendPtr backend = make_cpu_backend();
  return backend;
}

Dense random_dense(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  Dense out(cpu(), rows, cols);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < out.size(); ++i)
    out.data()[i] = dist(gen);
  return out;
}

/// Â of a graph of `n` nodes, two pseudo-random edges each.
Csr graph_of(GlobalId n) {
  graph::EdgeList edges;
  edges.num_nodes = n;
  for (GlobalId u = 0; u < n; ++u) {
    edges.add(u, (u * 7 + 3) % n);
    edges.add(u, (u * u + 11) % n);
  }
  return graph::gcn_normalize(graph::build_symmetric_csr(cpu(), edges));
}

/// x rounded to bfloat16 and widened back: what a bf16 layer computes with.
Dense rounded(ConstDenseView<float> x) {
  DenseT<Bf16> half(cpu(), x.rows, x.cols);
  ops::round_to_bf16(*cpu(), x, half.view());
  Dense out(cpu(), x.rows, x.cols);
  for (std::int64_t i = 0; i < x.size(); ++i)
    out.data()[i] = to_float(half.data()[i]);
  return out;
}

Dense product(Transpose ta, ConstDenseView<float> a, ConstDenseView<float> b) {
  Dense out(cpu(), ta == Transpose::No ? a.rows : a.cols, b.cols);
  ops::gemm(*cpu(), ta, Transpose::No, 1.0f, a, b, 0.0f, out.view());
  return out;
}

Dense aggregated(const Csr& s, ConstDenseView<float> x) {
  Dense out(cpu(), s.rows(), x.cols);
  ops::spmm(*cpu(), s.view(), x, out.view());
  return out;
}

/// Expects every element of `got` within 1e-5 of `want`'s largest magnitude (plus 1e-6): an
/// element that is a sum of thousands of products (a weight gradient) moves by that much with
/// the order of the sums, however small it is itself.
void expect_close(ConstDenseView<float> want, ConstDenseView<float> got, const char* what) {
  ASSERT_EQ(want.rows, got.rows) << what;
  ASSERT_EQ(want.cols, got.cols) << what;
  float largest = 0.0f;
  for (std::int64_t i = 0; i < want.size(); ++i)
    largest = std::max(largest, std::abs(want.data[i]));
  for (std::int64_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.data[i], want.data[i], 1e-6 + 1e-5 * largest) << what << " [" << i << "]";
}

float largest_difference(ConstDenseView<float> a, ConstDenseView<float> b) {
  float most = 0.0f;
  for (std::int64_t i = 0; i < a.size(); ++i)
    most = std::max(most, std::abs(a.data[i] - b.data[i]));
  return most;
}

/// The input gradients for dy of `conv` (after its forward `ctx`) and of `fp32` (forward on x
/// here), every gradient overwritten.
std::pair<ConstDenseView<float>, ConstDenseView<float>>
input_gradients(GcnConv<float>& conv, const Context<float>& ctx, GcnConv<float>& fp32,
                const Dense& x, const Dense& dy) {
  const Context<float> plain = fp32.forward(Step{}, Input<float>(x.cview()));
  return {conv.backward(ctx, dy.cview(), GradientMode::Overwrite, GradientMode::Overwrite),
          fp32.backward(plain, dy.cview(), GradientMode::Overwrite, GradientMode::Overwrite)};
}

TEST(ActivationDType, NamesRoundTripAndAnUnknownOneIsRefusedNamingTheValidOnes) {
  for (const ActivationDType dtype : {ActivationDType::Fp32, ActivationDType::Bf16})
    EXPECT_EQ(parse_activation_dtype(to_string(dtype)), dtype);
  EXPECT_THAT([] { parse_activation_dtype("fp16"); },
              ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("'fp16'"), HasSubstr("fp32"), HasSubstr("bf16"))));
}

/// Aggregate-first with bias, ReLU and dropout over 5000 rows of 128 (three cache blocks):
/// y = a((Â·round(x))·W + b) and, backward, dW = (Â·round(x))ᵀ·d, d the gradient before the
/// activation — the float32 layer over the rounded input, in training and in evaluation. The
/// float32 layer itself gives measurably different outputs.
TEST(Bf16GcnConv, AggregateFirstIsTheFloatLayerOverTheRoundedInput) {
  const Csr a = graph_of(5000);
  const Dense x = random_dense(5000, 128, 1);
  const Dense dy = random_dense(5000, 128, 2);
  const GcnActivation activation{true, 0.5f, 1};
  GcnConv<float> conv(cpu(), a, a, 128, 128, true, 3, 0, GcnOrder::AggregateThenTransform,
                      activation);
  GcnConv<float> fp32(cpu(), a, a, 128, 128, true, 3, 0, GcnOrder::AggregateThenTransform,
                      activation);
  conv.set_activation_dtype(ActivationDType::Bf16);
  EXPECT_THAT(conv.name(), HasSubstr("aggregates bf16"));
  const std::span<const float> bias(conv.parameters()[1]->value.data(), 128);

  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "evaluation");
    const Step step{9, 4, training, {}};
    const Dense sx = aggregated(a, rounded(x.cview()).cview());
    Dense want = product(Transpose::No, sx.cview(), conv.weight().value.cview());
    const float p = training ? activation.dropout : 0.0f;
    const RngKey key =
        RngKey::make(step.seed, RngPurpose::Dropout, activation.dropout_layer, step.epoch);
    ops::bias_activation(*cpu(), want.view(), bias, p, key, RowIds{}, true);

    const Context<float> ctx = conv.forward(step, Input<float>(x.cview()));
    expect_close(want.cview(), ctx.output.dense, "output");
    const Context<float> plain = fp32.forward(step, Input<float>(x.cview()));
    EXPECT_GT(largest_difference(plain.output.dense, ctx.output.dense), 1e-4f);

    conv.backward(ctx, dy.cview(), GradientMode::Ignore, GradientMode::Overwrite);
    Dense d_before(cpu(), 5000, 128);
    ops::relu_dropout_backward(*cpu(), ctx.output.dense, dy.cview(), d_before.view(), p);
    const Dense dw = product(Transpose::Yes, sx.cview(), d_before.cview());
    expect_close(dw.cview(), conv.weight().grad.cview(), "weight gradient");
  }
}

/// Transform-first rounds x·W before aggregating it: y = Â·round(x·W) + b. The backward reads
/// no rounded activation, so its gradients are the float32 layer's exactly.
TEST(Bf16GcnConv, TransformFirstAggregatesTheRoundedProductAndKeepsFloatGradients) {
  const Csr a = graph_of(700);
  const Dense x = random_dense(700, 40, 3);
  const Dense dy = random_dense(700, 16, 4);
  GcnConv<float> conv(cpu(), a, a, 40, 16, true, 5, 1, GcnOrder::TransformThenAggregate);
  GcnConv<float> fp32(cpu(), a, a, 40, 16, true, 5, 1, GcnOrder::TransformThenAggregate);
  conv.set_activation_dtype(ActivationDType::Bf16);

  Dense want = aggregated(
      a, rounded(product(Transpose::No, x.cview(), conv.weight().value.cview()).cview()).cview());
  ops::add_bias(*cpu(), want.view(),
                std::span<const float>(conv.parameters()[1]->value.data(), 16));
  const Context<float> ctx = conv.forward(Step{}, Input<float>(x.cview()));
  expect_close(want.cview(), ctx.output.dense, "output");

  const auto [dx, dx_fp32] = input_gradients(conv, ctx, fp32, x, dy);
  EXPECT_EQ(largest_difference(dx_fp32, dx), 0.0f);
  const auto pb = conv.parameters(), pf = fp32.parameters();
  for (std::size_t i = 0; i < pb.size(); ++i)
    EXPECT_EQ(largest_difference(pf[i]->grad.cview(), pb[i]->grad.cview()), 0.0f) << pb[i]->name;
}

/// A layer without an activation (the model's last, aggregate-first here) gives the input
/// gradient Âᵀ·(dy·Wᵀ), which does not depend on the rounding, and dW = (Â·round(x))ᵀ·dy.
TEST(Bf16GcnConv, AggregateFirstWithoutActivationGivesTheFloatInputGradient) {
  const Csr a = graph_of(900);
  const Dense x = random_dense(900, 24, 5);
  const Dense dy = random_dense(900, 8, 6);
  GcnConv<float> conv(cpu(), a, a, 24, 8, false, 7, 1, GcnOrder::AggregateThenTransform);
  GcnConv<float> fp32(cpu(), a, a, 24, 8, false, 7, 1, GcnOrder::AggregateThenTransform);
  conv.set_activation_dtype(ActivationDType::Bf16);

  const Dense sx = aggregated(a, rounded(x.cview()).cview());
  const Dense want = product(Transpose::No, sx.cview(), conv.weight().value.cview());
  const Context<float> ctx = conv.forward(Step{}, Input<float>(x.cview()));
  expect_close(want.cview(), ctx.output.dense, "output");

  const auto [dx, dx_fp32] = input_gradients(conv, ctx, fp32, x, dy);
  expect_close(dx_fp32, dx, "input gradient");
  const Dense dw = product(Transpose::Yes, sx.cview(), dy.cview());
  expect_close(dw.cview(), conv.weight().grad.cview(), "weight gradient");
}

TEST(Bf16GcnConv, IsRefusedInABudgetsMemoryAndForAFloat64Layer) {
  const Csr a = graph_of(300);
  OffloadConfig config;
  config.chunk_bytes = std::size_t{4} << 10;
  config.device_bytes = std::size_t{64} << 10;
  ChunkManager memory(cpu(), config);
  const Csr am = to_backend(a, memory.allocator(TensorKind::Matrix));
  GcnConv<float> managed(memory.allocator(TensorKind::Activation), am, am, 64, 64, true, 1, 0,
                         GcnOrder::AggregateThenTransform);

  // Refused when set, whatever the budget: its buffers are not among what the manager acquires.
  EXPECT_THAT([&] { managed.set_activation_dtype(ActivationDType::Bf16); },
              ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("bf16 activations"),
                                                   HasSubstr("cannot run under a memory budget"))));
  EXPECT_THAT(
      [&] { managed.set_input_dropout(0.5f, 0); },
      ThrowsMessage<InvalidArgument>(HasSubstr("dropout fused into a layer's input cannot run")));

  const CsrT<double> a64 = a.cast<double>();
  GcnConv<double> conv64(cpu(), a64, a64, 4, 4, true, 1, 0);
  EXPECT_THROW(conv64.set_activation_dtype(ActivationDType::Bf16), InvalidArgument);
}

/// Dropout fused into the layer (set_input_dropout) is the Dropout module before it: outputs and
/// every gradient, the input gradient included (a Linear before the pair makes it count), in
/// training and evaluation, float32 (the dropped copy) and bf16 (dropout and rounding in one
/// pass) alike.
TEST(Bf16GcnConv, InputDropoutInTheLayerIsTheDropoutModuleBeforeIt) {
  const Csr a = graph_of(3000);
  const Dense x = random_dense(3000, 24, 8);
  const Dense dy = random_dense(3000, 64, 9);
  for (const ActivationDType dtype : {ActivationDType::Fp32, ActivationDType::Bf16}) {
    SCOPED_TRACE(to_string(dtype));
    Sequential<float> fused, separate;
    fused.add(std::make_unique<Linear<float>>(cpu(), 24, 32, true, 3, 0));
    auto conv = std::make_unique<GcnConv<float>>(cpu(), a, a, 32, 64, true, 3, 1,
                                                 GcnOrder::AggregateThenTransform,
                                                 GcnActivation{true, 0.5f, 2});
    conv->set_activation_dtype(dtype);
    conv->set_input_dropout(0.5f, 1);
    EXPECT_THAT(conv->name(), HasSubstr("input Dropout(p=0.5)"));
    fused.add(std::move(conv));
    separate.add(std::make_unique<Linear<float>>(cpu(), 24, 32, true, 3, 0));
    separate.add(std::make_unique<Dropout<float>>(cpu(), 0.5f, 1));
    auto plain = std::make_unique<GcnConv<float>>(cpu(), a, a, 32, 64, true, 3, 1,
                                                  GcnOrder::AggregateThenTransform,
                                                  GcnActivation{true, 0.5f, 2});
    plain->set_activation_dtype(dtype);
    separate.add(std::move(plain));

    for (const bool training : {true, false}) {
      SCOPED_TRACE(training ? "training" : "evaluation");
      const Step step{11, 5, training, {}};
      const ConstDenseView<float> y_fused = fused.forward(step, Input<float>(x.cview()));
      const ConstDenseView<float> y_separate = separate.forward(step, Input<float>(x.cview()));
      EXPECT_EQ(largest_difference(y_separate, y_fused), 0.0f);
      if (!training) continue;
      fused.backward(dy.cview(), GradientMode::Overwrite);
      separate.backward(dy.cview(), GradientMode::Overwrite);
      const auto pf = fused.parameters(), ps = separate.parameters();
      ASSERT_EQ(pf.size(), ps.size());
      for (std::size_t i = 0; i < pf.size(); ++i) {
        EXPECT_EQ(largest_difference(ps[i]->grad.cview(), pf[i]->grad.cview()), 0.0f)
            << ps[i]->name;
      }
    }
  }
}

TEST(Bf16GcnConv, InputDropoutIsRefusedForATransformFirstLayer) {
  const Csr a = graph_of(40);
  GcnConv<float> conv(cpu(), a, a, 16, 4, true, 1, 0, GcnOrder::TransformThenAggregate);
  EXPECT_THAT([&] { conv.set_input_dropout(0.5f, 0); },
              ThrowsMessage<InvalidArgument>(HasSubstr("aggregate-first")));
}

/// build_gcn passes the model config's dtype to every graph layer.
TEST(Bf16GcnConv, TheGcnBuilderStoresEveryLayersActivationsAsConfigured) {
  const Csr a = graph_of(50);
  gnn::ModelSpec spec{{8, 12, 3}, {}, 0};
  spec.config.activation_dtype = ActivationDType::Bf16;

  const Sequential<float> model = gnn::build_gcn(cpu(), a, a, spec);

  // 8 -> 12 aggregates first (under Auto the narrower input moves): its input dropout is fused,
  // no Dropout module before it.
  ASSERT_EQ(model.modules().size(), 2u);
  EXPECT_THAT(model.modules()[0]->name(), HasSubstr("input Dropout(p=0.5)"));
  for (const auto& module : model.modules())
    EXPECT_THAT(module->name(), HasSubstr("aggregates bf16"));
  // Transform-first, it keeps the module.
  spec.config.order = GcnOrder::TransformThenAggregate;
  EXPECT_EQ(gnn::build_gcn(cpu(), a, a, spec).modules().size(), 3u);
}

} // namespace
} // namespace tessera
