// Checkpoints on one rank (several: tests/mpi): a stopped and resumed run trains exactly as an
// uninterrupted one, the folder keeps one complete checkpoint, and checkpoints of other data,
// shapes or versions, or damaged ones, are refused naming what is wrong.
#include "tessera/io/array_file.hpp"
#include "tessera/runtime/checkpoint.hpp"
#include "tessera/tessera.hpp"
#include "test_data.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kSbm = "sbm:nodes=1500,classes=4,avg-degree=8,p-in=0.8,features=12,noise=1";

/// A fresh folder for one test, removed at the end.
class CheckpointFolder {
public:
  explicit CheckpointFolder(const std::string& suffix = "") {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::temp_directory_path() /
             ("tessera-ckpt-" + std::to_string(getpid()) + "-" + test->name() + suffix))
                .string();
    fs::remove_all(path_);
  }
  ~CheckpointFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }

private:
  std::string path_;
};

runtime::TrainJob small_job(int epochs) {
  runtime::TrainJob job;
  job.dataset = kSbm;
  job.threads = 1;
  job.shape.hidden = 8;
  job.model.dropout = 0.5f;
  job.train.epochs = epochs;
  job.train.seed = 5;
  job.train.eval_every = 3;
  return job;
}

/// A stop hook that asks to stop (as SIGTERM would) once `epoch` epochs have run.
std::function<int()> stop_after(int epoch) {
  auto seen = std::make_shared<int>(0);
  return [seen, epoch] { return ++*seen >= epoch ? SIGTERM : 0; };
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_json(const std::string& path, const nlohmann::json& value) {
  std::ofstream(path) << value.dump();
}

/// Writes `value` as the checkpoint.json at `state` and seals it in `dir`'s latest.json, as an
/// edit by someone who knows the format would: what the reader checks beyond the seal.
void write_sealed(const std::string& dir, const std::string& state, const nlohmann::json& value) {
  const std::string text = value.dump();
  std::ofstream(state) << text;
  const std::string latest_file = (fs::path(dir) / "latest.json").string();
  nlohmann::json latest = read_json(latest_file);
  latest["checkpoint_crc"] = io::crc_hex(io::crc32_update(0, text.data(), text.size()));
  write_json(latest_file, latest);
}

/// Runs `job` until the stop hook fires after `epoch`, writing a checkpoint to `dir`.
void train_until_stopped(runtime::TrainJob job, int epoch, const std::string& dir) {
  job.checkpoint_dir = dir;
  job.stop_requested = stop_after(epoch);
  EXPECT_THROW(runtime::run_train_job(job), gnn::TrainingStopped);
}

/// `job` run whole, then stopped after `epoch` with a checkpoint in `dir` and resumed from it:
/// the whole run's result and the resumed run's.
std::pair<gnn::TrainResult, gnn::TrainResult> whole_and_resumed(const runtime::TrainJob& job,
                                                                int epoch, const std::string& dir) {
  gnn::TrainResult whole = runtime::run_train_job(job).result;
  train_until_stopped(job, epoch, dir);
  runtime::TrainJob resumed_job = job;
  resumed_job.resume_dir = dir;
  return {std::move(whole), runtime::run_train_job(resumed_job).result};
}

TEST(Checkpoint, StoppedAndResumedRunMatchesTheUninterruptedRunBitForBit) {
  const CheckpointFolder dir;

  const auto [whole, resumed] = whole_and_resumed(small_job(10), 4, dir.path());

  ASSERT_EQ(resumed.history.size(), 6u);
  for (std::size_t i = 0; i < resumed.history.size(); ++i) {
    const gnn::EpochStats& a = whole.history[i + 4];
    const gnn::EpochStats& b = resumed.history[i];
    EXPECT_EQ(b.epoch, a.epoch);
    EXPECT_EQ(b.train_loss, a.train_loss) << "epoch " << a.epoch;
    EXPECT_EQ(b.val.loss, a.val.loss) << "epoch " << a.epoch;
  }
  EXPECT_EQ(resumed.best_epoch, whole.best_epoch);
  EXPECT_EQ(resumed.test_at_best_val.accuracy, whole.test_at_best_val.accuracy);
}

TEST(Checkpoint, StopAskedFinishesTheEpochWritesItAndThrowsNamingTheSignalAndEpoch) {
  const CheckpointFolder dir;
  runtime::TrainJob job = small_job(10);
  job.checkpoint_dir = dir.path();
  job.stop_requested = stop_after(3);

  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ::testing::ThrowsMessage<gnn::TrainingStopped>(
                  AllOf(HasSubstr("SIGTERM"), HasSubstr("after epoch 3 of 10"))));
  const runtime::Checkpoint saved = runtime::read_checkpoint(dir.path());
  EXPECT_EQ(saved.state.epoch, 3);
  EXPECT_EQ(saved.state.adam_steps, 3);
}

TEST(Checkpoint, EveryNEpochsKeepsOnlyTheLatestCompleteCheckpoint) {
  const CheckpointFolder dir;
  runtime::TrainJob job = small_job(7);
  job.checkpoint_dir = dir.path();
  job.checkpoint_every = 3;

  runtime::run_train_job(job);

  EXPECT_EQ(read_json(dir.file("latest.json"))["checkpoint"], "epoch-000007");
  int epoch_folders = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    epoch_folders += entry.path().filename().string().starts_with("epoch-") ? 1 : 0;
  }
  EXPECT_EQ(epoch_folders, 1);
  const runtime::Checkpoint saved = runtime::read_checkpoint(dir.path());
  EXPECT_EQ(saved.state.epoch, 7);
  EXPECT_EQ(saved.run.layer_sizes, (std::vector<std::int64_t>{12, 8, 4}));
  EXPECT_EQ(saved.run.num_nodes, 1500);
  EXPECT_EQ(saved.run.seed, 5u);
}

TEST(Checkpoint, IncompleteNewerEpochFolderIsIgnoredAndTheLatestCompleteOneRead) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path());
  // What a crash while writing epoch 9 leaves: a folder without its checkpoint.json.
  fs::create_directories(dir.file("epoch-000009"));
  std::ofstream(dir.file("epoch-000009/param-0.value.bin")) << "partial";

  const runtime::Checkpoint saved = runtime::read_checkpoint(dir.path());

  EXPECT_EQ(saved.state.epoch, 2);
}

TEST(Checkpoint, ExistingCheckpointFolderIsNotOverwrittenByANewRunWithoutReplace) {
  const CheckpointFolder dir;
  runtime::TrainJob job = small_job(2);
  job.checkpoint_dir = dir.path();
  runtime::run_train_job(job);

  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ::testing::ThrowsMessage<IoError>(HasSubstr(dir.path())));
  job.replace_checkpoints = true;
  EXPECT_NO_THROW(runtime::run_train_job(job));
}

TEST(Checkpoint, CheckpointOfAnotherDatasetIsRefusedNamingTheField) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path());
  runtime::TrainJob other = small_job(10);
  other.dataset = "sbm:nodes=1600,classes=4,avg-degree=8,p-in=0.8,features=12,noise=1";
  other.resume_dir = dir.path();

  EXPECT_THAT([&] { runtime::run_train_job(other); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr(dir.path()), HasSubstr("made for dataset 'sbm:nodes=1500"),
                        HasSubstr("this run has 'sbm:nodes=1600"))));
}

// Issue 39: the weights were trained on features scaled one way; a resume must see the same.
TEST(Checkpoint, CheckpointOfOtherwiseNormalizedFeaturesIsRefusedNamingTheFlag) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path()); // generated data: as stored
  runtime::TrainJob normalized = small_job(10);
  normalized.normalize_features = true;
  normalized.resume_dir = dir.path();

  EXPECT_THAT([&] { runtime::run_train_job(normalized); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("made with input features as stored"),
                        HasSubstr("this run's are row-normalized"),
                        HasSubstr("--normalize-features false"))));
  normalized.normalize_features = false;
  EXPECT_NO_THROW(runtime::run_train_job(normalized));
}

TEST(Checkpoint, CheckpointOfAnotherModelShapeIsRefusedNamingTheField) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path());
  runtime::TrainJob wider = small_job(10);
  wider.shape.hidden = 16;
  wider.resume_dir = dir.path();

  EXPECT_THAT([&] { runtime::run_train_job(wider); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("layer sizes 12-8-4"), HasSubstr("12-16-4"))));
}

TEST(Checkpoint, CheckpointOfAnotherFormatVersionIsRefusedNamingTheField) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path());
  nlohmann::json latest = read_json(dir.file("latest.json"));
  latest["format_version"] = runtime::kCheckpointFormatVersion + 1;
  write_json(dir.file("latest.json"), latest);

  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("latest.json"),
                        HasSubstr("format_version' is " +
                                  std::to_string(runtime::kCheckpointFormatVersion + 1)))));
}

TEST(Checkpoint, AVersion2CheckpointWithoutTheSealStillResumes) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path());
  // What a build before the seal wrote: version 2 in both files, no checkpoint_crc.
  nlohmann::json latest = read_json(dir.file("latest.json"));
  latest["format_version"] = 2;
  latest.erase("checkpoint_crc");
  write_json(dir.file("latest.json"), latest);
  const std::string state = dir.file("epoch-000002/checkpoint.json");
  nlohmann::json document = read_json(state);
  document["format_version"] = 2;
  write_json(state, document);

  EXPECT_EQ(runtime::read_checkpoint(dir.path()).state.epoch, 2);
  // Resumed with a note that its metrics are taken as written.
  runtime::TrainJob job = small_job(4);
  job.resume_dir = dir.path();
  std::string said;
  runtime::run_train_job(job, [&](const std::string& line) { said += line + "\n"; });
  EXPECT_THAT(said, AllOf(HasSubstr("is of format 2"), HasSubstr("taken as written")));
  // A version 3 latest.json without its seal is refused.
  latest["format_version"] = 3;
  document["format_version"] = 3;
  write_json(dir.file("latest.json"), latest);
  write_json(state, document);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("checkpoint_crc")));
}

// ---- issue 37: checkpoints checked against themselves and the data ----------------------------

TEST(Checkpoint, ParameterFileFromAnotherRunIsRefusedByTheRecordedCrc) {
  const CheckpointFolder dir, other("-other");
  train_until_stopped(small_job(10), 2, dir.path());
  runtime::TrainJob reseeded = small_job(10);
  reseeded.train.seed = 6; // the same shapes, other values
  train_until_stopped(reseeded, 2, other.path());
  // A well-formed file of the right shape and a valid header CRC: only the CRC that
  // checkpoint.json records tells it apart.
  fs::copy_file(other.file("epoch-000002/param-1.value.bin"),
                dir.file("epoch-000002/param-1.value.bin"), fs::copy_options::overwrite_existing);

  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("param-1.value.bin"), HasSubstr("records"),
                        HasSubstr("not the one this checkpoint wrote"))));
}

TEST(Checkpoint, LatestNamingAnotherEpochThanItsFolderHoldsIsRefused) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path());
  // An older checkpoint renamed as if it were the one latest.json names.
  nlohmann::json latest = read_json(dir.file("latest.json"));
  latest["epoch"] = 6;
  latest["checkpoint"] = "epoch-000006";
  write_json(dir.file("latest.json"), latest);
  fs::rename(dir.file("epoch-000002"), dir.file("epoch-000006"));

  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("holds epoch 2"), HasSubstr("as epoch 6"))));
}

TEST(Checkpoint, LatestJsonThatIsAFifoIsRefusedNotWaitedOn) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path());
  fs::remove(dir.file("latest.json"));
  ASSERT_EQ(::mkfifo(dir.file("latest.json").c_str(), 0600), 0);

  // Reading it blocked forever (no writer), and so did the next checkpoint's write into the
  // folder, which reads it first.
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<IoError>(
                  AllOf(HasSubstr("latest.json"), HasSubstr("FIFO (named pipe)"))));
  runtime::TrainJob job = small_job(3);
  job.checkpoint_dir = dir.path();
  job.replace_checkpoints = true;
  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ::testing::ThrowsMessage<IoError>(
                  AllOf(HasSubstr("latest.json"), HasSubstr("FIFO (named pipe)"))));
}

TEST(Checkpoint, ResumingOnOtherDataOfTheSameNameIsRefusedByTheChecksum) {
  const CheckpointFolder dir;
  const std::string data = dir.path() + "-data.npz";
  datasets::Dataset original = datasets::load_dataset(make_cpu_backend(1), kSbm, {});
  datasets::save_npz(original, data);
  runtime::TrainJob job = small_job(10);
  job.dataset = "npz:" + data;
  train_until_stopped(job, 2, dir.path());
  // The same file name, nodes, widths and classes; other labels.
  std::swap(original.labels[0], original.labels[1]);
  std::swap(original.labels[2], original.labels[7]);
  datasets::save_npz(original, data);
  job.resume_dir = dir.path();

  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr(dir.path()), HasSubstr("with checksum"),
                        HasSubstr("the same name, other data"))));
  fs::remove(data);
}

TEST(Checkpoint, ResumingAtOrPastTheLastEpochIsRefused) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 4, dir.path());
  runtime::TrainJob job = small_job(4);
  job.resume_dir = dir.path();

  EXPECT_THAT([&] { runtime::run_train_job(job); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("after epoch 4")));
}

TEST(Checkpoint, ActivationDTypeIsSavedResumedWithANoteWhenItChangesAndFp32WhenAbsent) {
  const CheckpointFolder dir;
  runtime::TrainJob job = small_job(10);
  job.model.activation_dtype = ActivationDType::Bf16;

  const auto [whole, resumed] = whole_and_resumed(job, 4, dir.path());

  ASSERT_EQ(resumed.history.size(), 6u);
  EXPECT_EQ(resumed.history.back().train_loss, whole.history.back().train_loss);
  const runtime::Checkpoint saved = runtime::read_checkpoint(dir.path());
  EXPECT_EQ(saved.run.model.activation_dtype, ActivationDType::Bf16);
  runtime::CheckpointRun fp32 = saved.run;
  fp32.model.activation_dtype = ActivationDType::Fp32;
  EXPECT_THAT(
      runtime::check_resumable(dir.path(), saved.run, fp32),
      ::testing::Contains(AllOf(HasSubstr("--activation-dtype 'fp32'"), HasSubstr("had 'bf16'"))));
  // A checkpoint from before the field existed is float32; an unknown dtype is refused.
  const std::string state = dir.file("epoch-000004/checkpoint.json");
  nlohmann::json document = read_json(state);
  document["run"]["model"].erase("activation_dtype");
  write_sealed(dir.path(), state, document);
  EXPECT_EQ(runtime::read_checkpoint(dir.path()).run.model.activation_dtype, ActivationDType::Fp32);
  document["run"]["model"]["activation_dtype"] = "fp8";
  write_sealed(dir.path(), state, document);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("checkpoint.json"), HasSubstr("activation_dtype"))));
}

TEST(Checkpoint, TheSettingsThatShapeAModelAreSavedCheckedAndDefaultedWhenAbsent) {
  // Issue 40: a checkpoint is rebuilt from what it records (tessera-predict), so GAT's heads and
  // the residual blocks' settings are saved; an old checkpoint without them gets the flags'
  // defaults, and a count no flag allows is refused before a model is built from it.
  const CheckpointFolder dir;
  runtime::TrainJob job = small_job(2);
  job.model.heads = 3;
  job.model.output_heads = 2;
  job.model.attention_dropout = 0.25f;
  job.model.negative_slope = 0.1f;
  job.model.norm = gnn::NormKind::Batch;
  job.model.feed_forward_multiplier = 2;
  job.model_builder = gnn::builder_for(gnn::ModelKind::Gat);
  job.model_name = "GAT";
  job.checkpoint_dir = dir.path();
  runtime::run_train_job(job);

  const gnn::ModelConfig saved = runtime::read_checkpoint(dir.path()).run.model;
  EXPECT_EQ(saved.heads, 3);
  EXPECT_EQ(saved.output_heads, 2);
  EXPECT_EQ(saved.attention_dropout, 0.25f);
  EXPECT_EQ(saved.negative_slope, 0.1f);
  EXPECT_EQ(saved.norm, gnn::NormKind::Batch);
  EXPECT_EQ(saved.feed_forward_multiplier, 2);
  EXPECT_EQ(saved.init, gnn::WeightInit::Glorot);
  EXPECT_FALSE(saved.one_logit);

  const std::string state = dir.file("epoch-000002/checkpoint.json");
  nlohmann::json document = read_json(state);
  for (const char* key : {"heads", "output_heads", "attention_dropout", "negative_slope", "norm",
                          "feed_forward_multiplier", "init", "one_logit"})
    document["run"]["model"].erase(key);
  write_sealed(dir.path(), state, document);
  const gnn::ModelConfig old = runtime::read_checkpoint(dir.path()).run.model;
  EXPECT_EQ(old.heads, 8);
  EXPECT_EQ(old.output_heads, 1);
  EXPECT_EQ(old.attention_dropout, old.dropout);
  EXPECT_EQ(old.norm, gnn::NormKind::Layer);

  document["run"]["model"]["heads"] = 1 << 30;
  write_sealed(dir.path(), state, document);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(AllOf(HasSubstr("checkpoint.json"),
                                                          HasSubstr("'heads'"),
                                                          HasSubstr("outside [1, 4096]"))));
}

TEST(Checkpoint, DamagedCheckpointsAreRefusedWithTheFileNamed) {
  const CheckpointFolder dir;
  train_until_stopped(small_job(10), 2, dir.path());
  const std::string folder = dir.file("epoch-000002");
  const std::string state = folder + "/checkpoint.json";
  const nlohmann::json good = read_json(state);

  // Any edit of checkpoint.json breaks the seal latest.json keeps.
  nlohmann::json better = good;
  better["best_val"]["accuracy"] = 0.99;
  write_json(state, better);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("checkpoint.json"), HasSubstr("changed after"))));
  // Edits sealed again are checked field by field. A shape in the JSON far beyond what the files
  // hold: refused before any allocation.
  nlohmann::json huge = good;
  huge["parameters"][1]["rows"] = std::int64_t{1} << 30;
  write_sealed(dir.path(), state, huge);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("param-1.value.bin")));
  // A field of the wrong type, a metric no run measures, Adam steps that are not the epochs'.
  nlohmann::json wrong = good;
  wrong["epoch"] = "two";
  write_sealed(dir.path(), state, wrong);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("checkpoint.json"), HasSubstr("'epoch'"))));
  nlohmann::json impossible = good;
  impossible["best_val"]["accuracy"] = 1.5;
  write_sealed(dir.path(), state, impossible);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("'best_val.accuracy' is 1.5")));
  nlohmann::json steps = good;
  steps["adam_steps"] = 7;
  write_sealed(dir.path(), state, steps);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("'adam_steps' is 7")));
  // Text that is not JSON.
  std::ofstream(state) << "{\"format\": ";
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("not valid JSON")));
  // A weight that is not finite, written with a valid header and CRC and sealed again; then a
  // truncated weight file.
  const std::string weights = folder + "/param-0.value.bin";
  io::StoredArray<float> stored = io::read_array<float>(weights, true);
  stored.data.back() = std::numeric_limits<float>::quiet_NaN();
  nlohmann::json diverged = good;
  diverged["parameters"][0]["value_crc"] =
      io::crc_hex(io::write_array<float>(weights, stored.data, stored.rows, stored.cols));
  write_sealed(dir.path(), state, diverged);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("param-0.value.bin"), HasSubstr("not finite"))));
  fs::resize_file(weights, 70);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("param-0.value.bin")));
  // latest.json naming a folder outside the checkpoint folder, then no latest.json at all.
  nlohmann::json latest = read_json(dir.file("latest.json"));
  latest["checkpoint"] = "../elsewhere";
  write_json(dir.file("latest.json"), latest);
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<FormatError>(HasSubstr("'../elsewhere'")));
  fs::remove(dir.file("latest.json"));
  EXPECT_THAT([&] { runtime::read_checkpoint(dir.path()); },
              ::testing::ThrowsMessage<IoError>(HasSubstr("latest.json")));
}

} // namespace
} // namespace tessera
