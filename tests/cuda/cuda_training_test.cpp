// A whole training run on the GPU against the same run on the CPU: same masks, same weights,
// per-epoch losses within 1e-4 (relative) and the same accuracies up to a few argmax flips; and
// a GPU run under a device budget against the same run without one.
#include "cuda/cuda_test_util.hpp"
#include "test_data.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <tessera/tessera.hpp>

namespace tessera::testing {
namespace {

runtime::TrainJob job_on(DeviceChoice device, const std::string& dataset) {
  runtime::TrainJob job;
  job.dataset = dataset;
  job.load.data_dir = shared_data_dir();
  job.device = device;
  job.shape.hidden = 32;
  job.model.dropout = 0.5f;
  job.train.epochs = 20;
  job.train.seed = 3;
  return job;
}

void expect_gpu_matches_cpu(const std::string& dataset) {
  const gnn::TrainResult cpu = runtime::run_train_job(job_on(DeviceChoice::Cpu, dataset)).result;
  const gnn::TrainResult gpu = runtime::run_train_job(job_on(DeviceChoice::Cuda, dataset)).result;

  ASSERT_EQ(cpu.history.size(), gpu.history.size());
  for (std::size_t e = 0; e < cpu.history.size(); ++e) {
    SCOPED_TRACE("epoch " + std::to_string(e + 1));
    EXPECT_NEAR(gpu.history[e].train_loss, cpu.history[e].train_loss,
                1e-4 * std::abs(cpu.history[e].train_loss));
    EXPECT_NEAR(gpu.history[e].val.accuracy, cpu.history[e].val.accuracy, 0.01);
  }
}

TEST(CudaTraining, GeneratedGraphTrainingStepIsEquivalentToRef) {
  TESSERA_REQUIRE_GPU();
  expect_gpu_matches_cpu("sbm:nodes=5000,classes=5,avg-degree=10,p-in=0.8,features=48,noise=1.5");
}

TEST(CudaTraining, CoraWithSparseFeaturesIsEquivalentToRef) {
  TESSERA_REQUIRE_GPU();
  TESSERA_REQUIRE_DATA("cora_planetoid/cora_planetoid.npz");
  expect_gpu_matches_cpu("cora");
}

TEST(CudaTraining, UnderADeviceBudgetTrainsWhatItTrainsWithout) {
  TESSERA_REQUIRE_GPU();
  // 188 MiB of features, Â, activations, gradients, weights and Adam state, under 128 MiB of
  // device memory in 2 MiB chunks (the usual mapping granularity): chunks move every epoch.
  runtime::TrainJob job =
      job_on(DeviceChoice::Cuda, "sbm:nodes=100000,classes=5,avg-degree=10,p-in=0.8,features=64,"
                                 "noise=1.5");
  job.shape.hidden = 64;
  job.train.epochs = 5;
  runtime::TrainJob budgeted = job;
  budgeted.offload.chunk_bytes = std::size_t{2} << 20;
  budgeted.offload.device_bytes = std::size_t{128} << 20;

  const runtime::RunSummary plain = runtime::run_train_job(job);
  const runtime::RunSummary capped = runtime::run_train_job(budgeted);

  ASSERT_TRUE(capped.offloaded);
  EXPECT_GT(capped.offload_total.peak_tensor_bytes, budgeted.offload.device_bytes);
  EXPECT_LE(capped.offload_total.peak_device_bytes, budgeted.offload.device_bytes);
  EXPECT_GT(capped.offload_total.device_to_host_bytes, 0u);
  ASSERT_EQ(plain.result.history.size(), capped.result.history.size());
  for (std::size_t e = 0; e < plain.result.history.size(); ++e) {
    SCOPED_TRACE("epoch " + std::to_string(e + 1));
    const double loss = plain.result.history[e].train_loss;
    // cuSPARSE's transposed products may sum in a different order from run to run.
    EXPECT_NEAR(capped.result.history[e].train_loss, loss, 1e-5 * std::abs(loss));
  }
}

TEST(CudaTraining, DeviceCudaWithoutAGpuIsRefusedNamingTheFix) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";

  try {
    runtime::run_train_job(job_on(DeviceChoice::Cuda, "sbm:nodes=100,classes=2,features=4"));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("device choice auto"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace tessera::testing
