// Data parallelism on one process: how gradients form buckets (plan_buckets and DataParallel on
// adjacent and separate gradients), one rank's sum is its own gradient, misuse is refused by
// name, and Sequential hands each parameter over right after its module's backward.
#include "tessera/core/error.hpp"
#include "tessera/engine/data_parallel.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/sequential.hpp"
#include "test_models.hpp"
#include "unit/engine/arena_backend.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Range = std::pair<const std::byte*, std::size_t>;

/// Members of each bucket, in bucket order.
std::vector<std::vector<std::size_t>> members(const std::vector<BucketPlan>& plans) {
  std::vector<std::vector<std::size_t>> all;
  for (const BucketPlan& plan : plans)
    all.push_back(plan.members);
  return all;
}

/// A parameter [rows, cols] whose value is on the CPU and whose gradient is on `grads`.
Parameter<float> parameter(const BackendPtr& grads, const std::string& name, int rows, int cols) {
  return {name, DenseT<float>::zeros(make_cpu_backend(1), rows, cols),
          DenseT<float>::zeros(grads, rows, cols)};
}

TEST(PlanBuckets, AdjacentRangesShareABucketUpToTheSizeLimit) {
  alignas(64) static std::array<std::byte, 1024> memory{};
  const std::byte* m = memory.data();
  // Four 100-byte ranges back to back; a bucket holds at most 250 bytes.
  const std::vector<Range> ranges = {{m, 100}, {m + 100, 100}, {m + 200, 100}, {m + 300, 100}};

  const std::vector<BucketPlan> plans = plan_buckets(ranges, 250);

  EXPECT_THAT(members(plans), ElementsAre(ElementsAre(0, 1), ElementsAre(2, 3)));
  EXPECT_EQ(plans[0].begin, m);
  EXPECT_EQ(plans[0].bytes, 200u);
  EXPECT_EQ(plans[1].begin, m + 200);
  EXPECT_EQ(plans[1].bytes, 200u);
}

TEST(PlanBuckets, AGapBelow64BytesIsPaddingInTheBucketAndA64ByteGapSplits) {
  alignas(64) static std::array<std::byte, 1024> memory{};
  const std::byte* m = memory.data();
  // 63 bytes of padding after range 0; 64 after range 1.
  const std::vector<Range> ranges = {{m, 8}, {m + 71, 8}, {m + 143, 8}};

  const std::vector<BucketPlan> plans = plan_buckets(ranges, 1024);

  EXPECT_THAT(members(plans), ElementsAre(ElementsAre(0, 1), ElementsAre(2)));
  EXPECT_EQ(plans[0].bytes, 79u);
}

TEST(PlanBuckets, ARangeLargerThanTheLimitIsABucketOfItsOwn) {
  alignas(64) static std::array<std::byte, 1024> memory{};
  const std::byte* m = memory.data();
  const std::vector<Range> ranges = {{m, 16}, {m + 16, 500}, {m + 516, 16}, {m + 532, 16}};

  const std::vector<BucketPlan> plans = plan_buckets(ranges, 64);

  EXPECT_THAT(members(plans), ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2, 3)));
  EXPECT_EQ(plans[1].bytes, 500u);
}

TEST(PlanBuckets, BucketsFollowAddressesWhateverTheInputOrder) {
  alignas(64) static std::array<std::byte, 1024> memory{};
  const std::byte* m = memory.data();
  const std::vector<Range> ranges = {{m + 64, 32}, {m + 512, 32}, {m, 64}, {m + 96, 32}};

  const std::vector<BucketPlan> plans = plan_buckets(ranges, 1024);

  EXPECT_THAT(members(plans), ElementsAre(ElementsAre(2, 0, 3), ElementsAre(1)));
  EXPECT_EQ(plans[0].begin, m);
  EXPECT_EQ(plans[0].bytes, 128u);
}

TEST(PlanBuckets, EmptyRangesAreBucketsWithoutBytes) {
  alignas(64) static std::array<std::byte, 256> memory{};
  const std::byte* m = memory.data();
  const std::vector<Range> ranges = {{m, 32}, {nullptr, 0}, {m + 32, 32}};

  const std::vector<BucketPlan> plans = plan_buckets(ranges, 1024);

  EXPECT_THAT(members(plans), ElementsAre(ElementsAre(1), ElementsAre(0, 2)));
  EXPECT_EQ(plans[0].bytes, 0u);
}

TEST(PlanBuckets, OverlappingRangesAreRefusedNamingBoth) {
  alignas(64) static std::array<std::byte, 256> memory{};
  const std::byte* m = memory.data();
  const std::vector<Range> ranges = {{m + 100, 8}, {m, 64}, {m + 60, 8}};

  try {
    plan_buckets(ranges, 1024);
    FAIL() << "overlapping ranges were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("range 2"));
    EXPECT_THAT(e.what(), HasSubstr("overlaps range 1"));
  }
}

TEST(PlanBuckets, ABucketSizeOfZeroIsRefused) {
  try {
    plan_buckets({}, 0);
    FAIL() << "bucket_bytes 0 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("bucket_bytes must be positive"));
  }
}

TEST(DataParallel, AdjacentGradientsShareBucketsAndSeparateOnesHaveTheirOwn) {
  const auto arena = std::make_shared<testing::ArenaBackend>(4096);
  const BackendPtr cpu = make_cpu_backend(1);
  const auto comm = comm::make_self_communicator();
  // Three adjacent gradients of 16, 5 and 16 floats (44 bytes of padding after the 5).
  Parameter<float> a = parameter(arena, "a", 4, 4), b = parameter(arena, "b", 1, 5),
                   c = parameter(arena, "c", 2, 8);
  Parameter<float> d = parameter(cpu, "d", 3, 3), e = parameter(cpu, "e", 3, 3);

  const DataParallel adjacent(*comm, arena, {&a, &b, &c});
  const DataParallel limited(*comm, arena, {&a, &b, &c}, 128);
  const DataParallel separate(*comm, cpu, {&d, &e});

  EXPECT_EQ(adjacent.buckets(), 1u);
  EXPECT_EQ(limited.buckets(), 2u); // a and b span 84 bytes; with c, 192
  EXPECT_EQ(separate.buckets(), 2u);
}

TEST(DataParallel, OnOneRankEveryGradientStaysItsOwn) {
  const auto arena = std::make_shared<testing::ArenaBackend>(4096);
  const auto comm = comm::make_self_communicator();
  Parameter<float> a = parameter(arena, "a", 2, 3), b = parameter(arena, "b", 1, 7);
  for (std::int64_t i = 0; i < a.grad.size(); ++i)
    a.grad.data()[i] = static_cast<float>(i + 1);
  for (std::int64_t i = 0; i < b.grad.size(); ++i)
    b.grad.data()[i] = -static_cast<float>(i);
  DataParallel data_parallel(*comm, arena, {&a, &b});

  data_parallel.gradient_ready(b);
  data_parallel.gradient_ready(a);
  data_parallel.finish();

  EXPECT_EQ(a.grad(1, 2), 6.0f);
  EXPECT_EQ(b.grad(0, 6), -6.0f);
}

TEST(DataParallel, AParameterItWasNotGivenIsRefusedByName) {
  const BackendPtr cpu = make_cpu_backend(1);
  const auto comm = comm::make_self_communicator();
  Parameter<float> a = parameter(cpu, "layer0.weight", 2, 2);
  const Parameter<float> stranger = parameter(cpu, "layer9.bias", 1, 2);
  DataParallel data_parallel(*comm, cpu, {&a});

  try {
    data_parallel.gradient_ready(stranger);
    FAIL() << "an unknown parameter was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("'layer9.bias' is not one of the 1"));
  }
}

TEST(DataParallel, AParameterMarkedTwiceInAStepIsRefusedByNameAndFinishStartsTheNext) {
  const BackendPtr cpu = make_cpu_backend(1);
  const auto comm = comm::make_self_communicator();
  Parameter<float> a = parameter(cpu, "layer0.weight", 2, 2);
  DataParallel data_parallel(*comm, cpu, {&a});
  data_parallel.gradient_ready(a);

  try {
    data_parallel.gradient_ready(a);
    FAIL() << "a second mark in one step was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("'layer0.weight' was marked ready twice"));
  }
  data_parallel.finish();
  EXPECT_NO_THROW(data_parallel.gradient_ready(a));
}

TEST(DataParallel, AParameterGivenTwiceOrNullIsRefused) {
  const BackendPtr cpu = make_cpu_backend(1);
  const auto comm = comm::make_self_communicator();
  Parameter<float> a = parameter(cpu, "layer0.weight", 2, 2);

  try {
    DataParallel(*comm, cpu, {&a, &a});
    FAIL() << "a repeated parameter was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("parameter 1 ('layer0.weight') is given twice"));
  }
  try {
    DataParallel(*comm, cpu, {&a, nullptr});
    FAIL() << "a null parameter was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("parameter 1 is null"));
  }
}

TEST(Sequential, BackwardHandsOverEachParameterBeforeTheModulesBeforeItRun) {
  const BackendPtr cpu = make_cpu_backend(1);
  Sequential<float> model;
  model.add(std::make_unique<Linear<float>>(cpu, 3, 4, true, 1, 0));
  model.add(std::make_unique<Relu<float>>(cpu));
  model.add(std::make_unique<Linear<float>>(cpu, 4, 2, true, 1, 1));
  DenseT<float> x = DenseT<float>::zeros(cpu, 5, 3), dy = DenseT<float>::zeros(cpu, 5, 2);
  x.fill(0.5f);
  dy.fill(1.0f);
  const std::vector<Parameter<float>*> parameters = model.parameters(); // W0, b0, W1, b1
  // A sentinel the first layer's backward overwrites: still there means "not yet run".
  parameters[0]->grad.fill(12345.0f);
  model.forward(Step{}, x.cview());
  std::vector<std::string> order;
  std::vector<bool> first_layer_pending;

  model.backward(dy.cview(), GradientMode::Overwrite, [&](Parameter<float>& p) {
    order.push_back(p.name);
    first_layer_pending.push_back(parameters[0]->grad(0, 0) == 12345.0f);
  });

  EXPECT_THAT(order, ElementsAre(parameters[2]->name, parameters[3]->name, parameters[0]->name,
                                 parameters[1]->name));
  EXPECT_THAT(first_layer_pending, ElementsAre(true, true, false, false));
}

TEST(Sequential, BackwardWithoutParameterGradientsHandsNothingOver) {
  const BackendPtr cpu = make_cpu_backend(1);
  Sequential<float> model;
  model.add(std::make_unique<Linear<float>>(cpu, 3, 2, true, 1, 0));
  DenseT<float> x = DenseT<float>::zeros(cpu, 2, 3), dy = DenseT<float>::zeros(cpu, 2, 2);
  model.forward(Step{}, x.cview());
  int calls = 0;

  model.backward(dy.cview(), GradientMode::Ignore, [&](Parameter<float>&) { ++calls; });

  EXPECT_EQ(calls, 0);
}

TEST(Sequential, ElementwiseModulesWriteTheirInputGradientOverTheOneTheyReceive) {
  // Linear → ReLU+Dropout → Dropout → Linear: ReLU+Dropout writes its output over the first
  // Linear's (which no backward reads), and the two elementwise modules' input gradients are
  // written over the second Linear's, so they allocate neither; outputs and gradients are those
  // of each module's plain forward and backward, run by hand on twins.
  const BackendPtr cpu = make_cpu_backend(1);
  const auto modules = [&cpu] {
    std::vector<std::unique_ptr<Module<float>>> m;
    m.push_back(std::make_unique<Linear<float>>(cpu, 3, 4, true, 1, 0));
    m.push_back(std::make_unique<ReluDropout<float>>(cpu, 0.3f, 1));
    m.push_back(std::make_unique<Dropout<float>>(cpu, 0.4f, 2));
    m.push_back(std::make_unique<Linear<float>>(cpu, 4, 2, true, 1, 1));
    return m;
  };
  Sequential<float> model;
  for (auto& m : modules())
    model.add(std::move(m));
  const auto twins = modules();
  DenseT<float> x0(cpu, 7, 3), dy(cpu, 7, 2);
  for (std::int64_t i = 0; i < x0.size(); ++i)
    x0.data()[i] = std::sin(0.7f * static_cast<float>(i)); // both signs: ReLU's two branches
  for (std::int64_t i = 0; i < dy.size(); ++i)
    dy.data()[i] = std::cos(0.3f * static_cast<float>(i));
  const Step step{5, 1, true, {}};
  const std::vector<float> dy_before(dy.data(), dy.data() + dy.size());

  const ConstDenseView<float> y = model.forward(step, x0.cview());
  const std::vector<float> output(y.data, y.data + y.size());
  model.backward(dy.cview());
  std::vector<Context<float>> contexts;
  Input<float> x = x0.cview();
  for (auto& m : twins) {
    contexts.push_back(m->forward(step, x));
    x = contexts.back().output;
  }
  const ConstDenseView<float> twin_y = x.dense;
  EXPECT_EQ(output, std::vector<float>(twin_y.data, twin_y.data + twin_y.size()));
  ConstDenseView<float> d = dy.cview();
  for (std::size_t i = twins.size(); i-- > 0;) {
    d = twins[i]->backward(contexts[i], d, i == 0 ? GradientMode::Ignore : GradientMode::Overwrite,
                           GradientMode::Overwrite);
  }

  const auto got = model.parameters();
  std::vector<Parameter<float>*> want;
  for (auto& m : twins) {
    for (Parameter<float>* p : m->parameters())
      want.push_back(p);
  }
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t p = 0; p < got.size(); ++p) {
    EXPECT_EQ(std::vector<float>(got[p]->grad.data(), got[p]->grad.data() + got[p]->grad.size()),
              std::vector<float>(want[p]->grad.data(), want[p]->grad.data() + want[p]->grad.size()))
        << got[p]->name;
  }
  // ReLU+Dropout holds no buffer (its twin an output and an input gradient); Dropout, after a
  // module whose backward reads its output, holds its own output but no input gradient.
  EXPECT_EQ(model.modules()[1]->bytes(), 0U);
  EXPECT_EQ(twins[1]->bytes(), 2 * 7 * 4 * sizeof(float));
  EXPECT_EQ(model.modules()[2]->bytes(), 7 * 4 * sizeof(float));
  EXPECT_EQ(twins[2]->bytes(), 2 * 7 * 4 * sizeof(float));
  // The caller's gradient is read, never written.
  EXPECT_EQ(std::vector<float>(dy.data(), dy.data() + dy.size()), dy_before);
}

TEST(Sequential, AnElementwiseModuleRunsInPlaceAfterALayerThatReadSparseFeatures) {
  // Linear on bag-of-words rows (a sparse input: its dense output is its own buffer) → ReLU.
  const BackendPtr cpu = make_cpu_backend(1);
  CsrT<float> x(cpu, 4, 5, 5);
  const Offset row_ptr[] = {0, 2, 3, 3, 5};
  const LocalId col[] = {0, 3, 1, 2, 4};
  const float val[] = {1.0f, -2.0f, 0.5f, 3.0f, -1.0f};
  std::copy(std::begin(row_ptr), std::end(row_ptr), x.row_ptr());
  std::copy(std::begin(col), std::end(col), x.col());
  std::copy(std::begin(val), std::end(val), x.val());
  Sequential<float> model;
  model.add(std::make_unique<Linear<float>>(cpu, 5, 3, true, 1, 0));
  model.add(std::make_unique<Relu<float>>(cpu));
  Linear<float> twin(cpu, 5, 3, true, 1, 0);

  const ConstDenseView<float> y = model.forward(Step{}, Input<float>(x.view()));

  const ConstDenseView<float> pre = twin.forward(Step{}, Input<float>(x.view())).output.dense;
  for (std::int64_t i = 0; i < y.size(); ++i)
    EXPECT_EQ(y.data[i], std::max(pre.data[i], 0.0f)) << i;
  EXPECT_EQ(y.data, model.modules()[0]->forward(Step{}, Input<float>(x.view())).output.dense.data);
  EXPECT_EQ(model.modules()[1]->bytes(), 0U); // no output buffer of its own
}

TEST(Sequential, AnElementwiseLastModuleLeavesTheCallersGradientAlone) {
  const BackendPtr cpu = make_cpu_backend(1);
  Sequential<float> model;
  model.add(std::make_unique<Linear<float>>(cpu, 3, 2, true, 1, 0));
  model.add(std::make_unique<Dropout<float>>(cpu, 0.5f, 1));
  DenseT<float> x = DenseT<float>::zeros(cpu, 6, 3), dy = DenseT<float>::zeros(cpu, 6, 2);
  x.fill(0.5f);
  dy.fill(1.0f);
  model.forward(Step{3, 1, true, {}}, x.cview());

  model.backward(dy.cview());

  for (std::int64_t i = 0; i < dy.size(); ++i)
    EXPECT_EQ(dy.data()[i], 1.0f) << i;
}

TEST(Sequential, ForwardThroughAMarkedLayerGivesItsOutputBeforeTheRestRuns) {
  // Linear → ReLU (layer 1 ends) → Linear: forward through the mark is what the first two
  // modules give alone, though the ReLU runs in place over the Linear's output.
  const BackendPtr cpu = make_cpu_backend(1);
  Sequential<float> model;
  model.add(std::make_unique<Linear<float>>(cpu, 3, 4, true, 1, 0));
  model.add(std::make_unique<Relu<float>>(cpu));
  model.end_layer();
  model.add(std::make_unique<Linear<float>>(cpu, 4, 2, true, 1, 1));
  auto alone = testing::linear_relu(cpu); // the same first two modules, the same seed
  const testing::LinearReluBatch batch(cpu);
  const Step eval{0, 1, false, {}};

  ASSERT_THAT(model.layer_ends(), ElementsAre(2u));
  const ConstDenseView<float> logits = model.forward(eval, batch.x.cview());
  EXPECT_EQ(logits.cols, 2);
  const ConstDenseView<float> hidden = model.forward(eval, batch.x.cview(), 2);
  const std::vector<float> got(hidden.data, hidden.data + hidden.rows * hidden.cols);
  const ConstDenseView<float> expected = alone->forward(eval, batch.x.cview());

  ASSERT_EQ(hidden.rows, 5);
  ASSERT_EQ(hidden.cols, 4);
  EXPECT_EQ(got, std::vector<float>(expected.data, expected.data + 20));
  EXPECT_THROW(model.forward(eval, batch.x.cview(), 4), InvalidArgument);
  EXPECT_THROW(model.forward(eval, batch.x.cview(), 0), InvalidArgument);
}

TEST(Sequential, ATrainingHookRunsAroundEveryTrainingCallAndChangesNoResult) {
  // before and after run around every training forward and backward call of every module, not
  // around evaluation; the outputs and gradients stay as they were.
  const BackendPtr cpu = make_cpu_backend(1);
  auto plain = testing::linear_relu(cpu), hooked = testing::linear_relu(cpu);
  int before = 0, after = 0;
  hooked->set_training_hook({[&before] { ++before; },
                             [&after, &before](double seconds) {
                               EXPECT_GE(seconds, 0.0);
                               EXPECT_EQ(after + 1, before); // each after closes its before
                               ++after;
                             }});
  const testing::LinearReluBatch batch(cpu);
  const DenseT<float>&x = batch.x, &dy = batch.dy;
  const Step training{0, 1, true, {}};

  const ConstDenseView<float> want = plain->forward(training, x.cview());
  const ConstDenseView<float> got = hooked->forward(training, x.cview());
  EXPECT_EQ(std::vector<float>(got.data, got.data + got.size()),
            std::vector<float>(want.data, want.data + want.size()));
  plain->backward(dy.cview());
  hooked->backward(dy.cview());

  EXPECT_EQ(before, 2 * 2); // 2 modules × forward and backward
  EXPECT_EQ(after, 4);
  EXPECT_EQ(hooked->parameters()[0]->grad(0, 0), plain->parameters()[0]->grad(0, 0));
  hooked->forward(Step{0, 1, false, {}}, x.cview()); // evaluation runs no hook
  EXPECT_EQ(before, 4);
  hooked->set_training_hook({}); // removed
  hooked->forward(training, x.cview());
  EXPECT_EQ(before, 4);
}

} // namespace
} // namespace tessera
