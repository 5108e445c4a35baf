// The testing seam: the slower device reads its clock around every training call and changes no
// result; the simulations' flags are parsed and checked naming the flag; an injected failure
// fires on its rank and epoch alone.
#include "tessera/tessera.hpp"
#include "test_models.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdexcept>

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(SlowerDevice, ReadsItsClockAroundEveryTrainingCallChangesNoResultAndLeavesNoHook) {
  const BackendPtr cpu = make_cpu_backend(1);
  auto plain = testing::linear_relu(cpu), slowed = testing::linear_relu(cpu);
  const testing::LinearReluBatch batch(cpu);
  const DenseT<float>&x = batch.x, &dy = batch.dy;
  const Step training{0, 1, true, {}};
  int reads = 0;

  {
    const runtime::SlowerDevice slower(*slowed, 1.5, [&reads] {
      ++reads;
      return 0.0;
    });
    const ConstDenseView<float> want = plain->forward(training, x.cview());
    const ConstDenseView<float> got = slowed->forward(training, x.cview());
    EXPECT_EQ(std::vector<float>(got.data, got.data + got.size()),
              std::vector<float>(want.data, want.data + want.size()));
    plain->backward(dy.cview());
    slowed->backward(dy.cview());
    slowed->forward(Step{0, 1, false, {}}, x.cview()); // evaluation is not slowed
  }
  slowed->forward(training, x.cview()); // the device is itself again

  EXPECT_EQ(reads, 2 * 2 * 2); // 2 modules × forward and backward × before and after
  EXPECT_EQ(slowed->parameters()[0]->grad(0, 0), plain->parameters()[0]->grad(0, 0));
  EXPECT_THROW(runtime::SlowerDevice(*slowed, 0.5, {}), InvalidArgument);
  EXPECT_THROW(runtime::SlowerDevice(*slowed, std::nan(""), {}), InvalidArgument);
}

TEST(Simulation, IsCheckedAgainstTheJobNamingTheFlag) {
  runtime::Simulation simulation;
  simulation.rank_speeds = {{1, 0.5}};

  EXPECT_EQ(simulation.slowdown(1), 2.0);
  EXPECT_EQ(simulation.slowdown(0), 1.0);
  EXPECT_NO_THROW(simulation.check(2, 10));
  EXPECT_THAT([&] { simulation.check(1, 10); },
              ThrowsMessage<InvalidArgument>(HasSubstr("names rank 1, but the job has 1")));
  simulation.rank_speeds = {{0, 1.5}};
  EXPECT_THAT([&] { simulation.check(1, 10); },
              ThrowsMessage<InvalidArgument>(HasSubstr("expects a factor in (0, 1]")));
  simulation.rank_speeds.clear();
  simulation.fail_rank = 0;
  simulation.fail_epoch = 11;
  EXPECT_THAT([&] { simulation.check(1, 10); },
              ThrowsMessage<InvalidArgument>(HasSubstr("but --epochs is 10")));
}

TEST(Simulation, AnInjectedFailureFiresOnItsRankAndEpochAlone) {
  runtime::Simulation simulation;
  simulation.fail_rank = 1;
  simulation.fail_epoch = 3;

  EXPECT_NO_THROW(simulation.after_epoch(0, 3));
  EXPECT_NO_THROW(simulation.after_epoch(1, 2));
  EXPECT_THAT([&] { simulation.after_epoch(1, 3); },
              ThrowsMessage<std::runtime_error>(HasSubstr("injected failure after epoch 3")));
  EXPECT_NO_THROW(runtime::Simulation{}.after_epoch(0, 1));
}

} // namespace
} // namespace tessera
