// Checkpoints across ranks: a run stopped (as by a signal on one rank) and resumed at the same
// rank count trains bit for bit as the uninterrupted run, and a checkpoint made at P ranks
// resumes at Q ranks (1 → this job's count and back) within float reassociation.
#include "mpi/mpi_test_main.hpp"

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <tessera/runtime/checkpoint.hpp>
#include <tessera/tessera.hpp>
#include <unistd.h>

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::world;

runtime::TrainJob generated_job(int epochs) {
  runtime::TrainJob job;
  job.dataset = "sbm:nodes=2000,classes=4,avg-degree=8,p-in=0.8,features=16,noise=1.5";
  job.threads = 1;
  job.shape.hidden = 16;
  job.model.dropout = 0.5f;
  job.train.epochs = epochs;
  job.train.eval_every = 2;
  job.train.seed = 11;
  return job;
}

/// A folder every rank of this job names the same (ranks of one mpirun share its pid), made
/// empty by rank 0 before anyone uses it.
std::string shared_folder(const std::string& name) {
  const std::string path =
      (fs::temp_directory_path() / ("tessera-ckpt-mpi-" + std::to_string(getppid()) + "-" + name))
          .string();
  if (world()->rank() == 0) fs::remove_all(path);
  world()->barrier();
  return path;
}

/// Stops after `epoch` epochs as a SIGTERM to the last rank alone would: the ranks agree.
std::function<int()> signal_on_last_rank_after(int epoch) {
  auto seen = std::make_shared<int>(0);
  const bool last = world()->rank() == world()->size() - 1;
  return [seen, epoch, last] { return ++*seen >= epoch && last ? SIGTERM : 0; };
}

TEST(CheckpointResume, StoppedAndResumedRunMatchesTheUninterruptedRunBitForBit) {
  const std::string dir = shared_folder("same-ranks");
  runtime::TrainJob job = generated_job(9);
  job.comm = world();
  const gnn::TrainResult whole = runtime::run_train_job(job).result;
  runtime::TrainJob stopped = job;
  stopped.checkpoint_dir = dir;
  stopped.stop_requested = signal_on_last_rank_after(4);
  EXPECT_THROW(runtime::run_train_job(stopped), gnn::TrainingStopped);
  world()->barrier(); // rank 0 wrote the checkpoint before throwing; others read it next
  runtime::TrainJob resumed_job = job;
  resumed_job.resume_dir = dir;

  const gnn::TrainResult resumed = runtime::run_train_job(resumed_job).result;

  ASSERT_EQ(resumed.history.size(), 5u);
  for (std::size_t i = 0; i < resumed.history.size(); ++i) {
    EXPECT_EQ(resumed.history[i].train_loss, whole.history[i + 4].train_loss)
        << "epoch " << whole.history[i + 4].epoch;
  }
  EXPECT_EQ(resumed.best_epoch, whole.best_epoch);
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(dir);
}

void expect_close_losses(const gnn::TrainResult& whole, const gnn::TrainResult& resumed,
                         std::size_t first) {
  ASSERT_EQ(resumed.history.size() + first, whole.history.size());
  for (std::size_t i = 0; i < resumed.history.size(); ++i) {
    const double want = whole.history[i + first].train_loss;
    EXPECT_NEAR(resumed.history[i].train_loss, want, 1e-5 * std::abs(want))
        << "epoch " << whole.history[i + first].epoch;
  }
}

TEST(CheckpointResume, CheckpointMadeByOneProcessResumesOnEveryRankCount) {
  // Every rank makes the same one-process checkpoint in a folder of its own.
  const std::string dir = shared_folder("one-to-many") + "-rank" + std::to_string(world()->rank());
  fs::remove_all(dir);
  runtime::TrainJob alone = generated_job(8);
  alone.checkpoint_dir = dir;
  alone.stop_requested = [seen = std::make_shared<int>(0)] { return ++*seen >= 3 ? SIGINT : 0; };
  EXPECT_THROW(runtime::run_train_job(alone), gnn::TrainingStopped);
  runtime::TrainJob job = generated_job(8);
  job.comm = world();
  const gnn::TrainResult whole = runtime::run_train_job(job).result;
  job.resume_dir = dir;

  const gnn::TrainResult resumed = runtime::run_train_job(job).result;

  expect_close_losses(whole, resumed, 3);
  fs::remove_all(dir);
}

TEST(CheckpointResume, CheckpointMadeOnEveryRankResumesInOneProcess) {
  const std::string dir = shared_folder("many-to-one");
  runtime::TrainJob job = generated_job(8);
  job.comm = world();
  job.checkpoint_dir = dir;
  job.stop_requested = signal_on_last_rank_after(5);
  EXPECT_THROW(runtime::run_train_job(job), gnn::TrainingStopped);
  world()->barrier();
  runtime::TrainJob alone = generated_job(8);
  const gnn::TrainResult whole = runtime::run_train_job(alone).result;
  alone.resume_dir = dir;

  const gnn::TrainResult resumed = runtime::run_train_job(alone).result;

  expect_close_losses(whole, resumed, 5);
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(dir);
}

// Rank 0 alone claims the checkpoint folder: its refusal must reach every rank before any
// collective, or the others would wait for rank 0 forever.
TEST(CheckpointResume, ACheckpointFolderRefusedOnRankZeroFailsEveryRank) {
  const std::string dir = shared_folder("foreign");
  if (world()->rank() == 0) {
    fs::create_directories(dir);
    std::ofstream(fs::path(dir) / "notes.txt") << "not ours\n";
  }
  world()->barrier();
  runtime::TrainJob job = generated_job(2);
  job.comm = world();
  job.checkpoint_dir = dir;

  try {
    runtime::run_train_job(job);
    ADD_FAILURE() << "rank " << world()->rank() << " trained into a foreign folder";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
    if (world()->rank() != 0) {
      EXPECT_NE(std::string(e.what()).find("rank 0 could not open the checkpoint folders"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(fs::exists(fs::path(dir) / "notes.txt"));
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(dir);
}

} // namespace
} // namespace tessera
