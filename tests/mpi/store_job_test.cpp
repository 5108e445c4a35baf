// Jobs that read a partition store: a rank whose part comes from another store, or fails to
// load, fails every rank with one message naming that rank and its file (never a hang or a
// truncated message); a store cut from another graph of the same name is refused; data that
// cannot be trained on says what it holds, on every rank.
#include "mpi/mpi_test_main.hpp"
#include "mpi/shared_folder.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <tessera/io/array_file.hpp>
#include <tessera/tessera.hpp>
#include <vector>

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::SharedFolder;
using testing::world;

constexpr const char* kGraph = "sbm:nodes=600,classes=4,avg-degree=6,p-in=0.8,features=8,noise=1";

datasets::Dataset graph(std::uint64_t seed) {
  return datasets::load_dataset(make_cpu_backend(1), kGraph, {"", 0, seed});
}

/// Writes the store of `data` with one part per rank into `dir` (call on one rank).
void write_store_of(const datasets::Dataset& data, const std::string& dir) {
  partition::Options options;
  options.num_parts = world()->size();
  const partition::Partition parts = partition::partition_graph(data.adjacency, options);
  partition::write_store(dir, data, parts, options, partition::Reorder::None,
                         partition::measure(data.adjacency, parts));
}

/// Seals part `part` of `store` again after an edit of its arrays, as a forger would: the part's
/// checksum (over each file's payload CRC, dense features) and the manifest.
void reseal_part(const std::string& store, int part) {
  const fs::path folder = fs::path(partition::part_description_path(store, part)).parent_path();
  std::uint32_t crc = 0;
  for (const char* name : {"owned_ids.bin", "ghost_ids.bin", "ghost_owner.bin", "degree.bin",
                           "adj_row_ptr.bin", "adj_col.bin", "adj_val.bin", "features.bin",
                           "labels.bin", "train_idx.bin", "val_idx.bin", "test_idx.bin"}) {
    std::ifstream in(folder / name, std::ios::binary);
    char header[44];
    in.read(header, sizeof header);
    crc = io::crc32_update(crc, header + 40, 4);
  }
  partition::Manifest manifest = partition::read_manifest(store);
  manifest.part_checksums[static_cast<std::size_t>(part)] = io::crc_hex(crc);
  partition::write_manifest(store, manifest);
}

runtime::TrainJob small_job() {
  runtime::TrainJob job;
  job.threads = 1;
  job.shape.hidden = 8;
  job.train.epochs = 2;
  job.comm = world();
  return job;
}

/// Runs `job` on this rank and expects E with each of `parts` in its message.
template <typename E>
void expect_refused(const runtime::TrainJob& job, const std::vector<std::string>& parts) {
  try {
    runtime::run_train_job(job);
    ADD_FAILURE() << "rank " << world()->rank() << ": expected a refusal";
  } catch (const E& e) {
    for (const auto& part : parts)
      EXPECT_THAT(e.what(), HasSubstr(part)) << "rank " << world()->rank();
  }
}

TEST(StoreJob, PartsOfDifferentStoresFailEveryRankNamingTheOddRankAndFile) {
  if (world()->size() < 2) GTEST_SKIP() << "one rank reads one part";
  const SharedFolder folder("facts");
  const std::string four = folder.file("four"), five = folder.file("five");
  if (world()->rank() == 0) {
    datasets::Dataset data = graph(1);
    write_store_of(data, four);
    data.num_classes = 5; // the same graph and labels: only part.json's num_classes differs
    write_store_of(data, five);
  }
  world()->barrier();
  runtime::TrainJob job = small_job();
  job.partition_dir = world()->rank() == 1 ? five : four;

  expect_refused<FormatError>(
      job, {"num_classes", "rank 1 (" + partition::part_description_path(five, 1) + ") has 5",
            "rank 0 (" + partition::part_description_path(four, 0) + ") has 4"});
}

TEST(StoreJob, APartThatFailsToLoadOnOneRankFailsEveryRank) {
  if (world()->size() < 2) GTEST_SKIP() << "needs a second rank to fail";
  const SharedFolder folder("corrupt");
  const std::string dir = folder.file("store");
  const std::string file = (fs::path(dir) / "part-00001" / "adj_col.bin").string();
  if (world()->rank() == 0) {
    write_store_of(graph(1), dir);
    std::fstream bytes(file, std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekp(64);
    bytes.put('\x7f');
  }
  world()->barrier();
  runtime::TrainJob job = small_job();
  job.partition_dir = dir;

  if (world()->rank() == 1) {
    expect_refused<FormatError>(job, {file, "CRC-32"});
  } else {
    expect_refused<FormatError>(job, {"rank 1 could not load its part", file, "CRC-32"});
  }
}

TEST(StoreJob, AStoreCutFromAnotherGraphOfTheSameNameIsRefused) {
  const SharedFolder folder("checksum");
  const auto cora_in = [&](const std::string& dir) {
    return (fs::path(dir) / "cora_planetoid" / "cora_planetoid.npz").string();
  };
  const std::string original = folder.file("original"), other = folder.file("other");
  const std::string store = folder.file("store");
  if (world()->rank() == 0) {
    fs::create_directories(fs::path(cora_in(original)).parent_path());
    fs::create_directories(fs::path(cora_in(other)).parent_path());
    datasets::save_npz(graph(1), cora_in(original));
    datasets::save_npz(graph(2), cora_in(other)); // another graph saved as cora
    write_store_of(datasets::load_dataset(make_cpu_backend(1), "cora", {original, 0, 0}), store);
  }
  world()->barrier();
  runtime::TrainJob job = small_job();
  job.partition_dir = store;
  job.dataset = "cora";
  job.load.data_dir = other;

  expect_refused<InvalidArgument>(job, {"partition store '" + store +
                                            "' was cut from a graph "
                                            "with checksum",
                                        "--dataset cora (data dir '" + other + "') has checksum"});

  job.load.data_dir = original;
  EXPECT_EQ(runtime::run_train_job(job).result.history.size(), 2u);
}

// Issue 37: the store of npz:FILE records the name "FILE's stem", which is no dataset name; the
// same spec must still match it (by checksum), and another file of that stem must not.
TEST(StoreJob, AStoreIsMatchedToItsSpecByChecksumNotByTheNameItRecorded) {
  const SharedFolder folder("spec");
  const std::string path = folder.file("het_ok.npz"), other = folder.file("other/het_ok.npz");
  const std::string store = folder.file("store");
  if (world()->rank() == 0) {
    datasets::save_npz(graph(1), path);
    fs::create_directories(fs::path(other).parent_path());
    datasets::save_npz(graph(2), other);
    write_store_of(datasets::load_dataset(make_cpu_backend(1), "npz:" + path, {}), store);
  }
  world()->barrier();
  runtime::TrainJob job = small_job();
  job.partition_dir = store;
  job.dataset = "npz:" + path;

  EXPECT_EQ(runtime::run_train_job(job).result.history.size(), 2u);
  job.dataset = "npz:" + other;
  expect_refused<InvalidArgument>(job, {"was cut from a graph with checksum"});
}

// Issue 37: a part file that is a FIFO blocked its rank forever in open() while the others
// waited in the first collective; it is refused before it is opened, on every rank.
TEST(StoreJob, APartFileThatIsAFifoFailsEveryRankNamingItInsteadOfBlocking) {
  const SharedFolder folder("fifo");
  const std::string store = folder.file("store");
  const int last = world()->size() - 1;
  const std::string labels = partition::part_description_path(store, last);
  const std::string fifo = (fs::path(labels).parent_path() / "labels.bin").string();
  if (world()->rank() == 0) {
    write_store_of(graph(1), store);
    fs::remove(fifo);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  }
  world()->barrier();
  runtime::TrainJob job = small_job();
  job.partition_dir = store;

  // The rank that read it names the file; every other one also names that rank.
  std::vector<std::string> parts{fifo, "FIFO (named pipe), not a regular file"};
  if (world()->rank() != last) parts.push_back("rank " + std::to_string(last));
  expect_refused<IoError>(job, parts);
}

// Issue 37: a ghost row's degree (its column's normalisation) came from the part file alone; one
// edited within range, with the store re-sealed, trained on another graph without a word.
TEST(StoreJob, AGhostDegreeItsOwnerDoesNotHaveFailsEveryRank) {
  if (world()->size() < 2) GTEST_SKIP() << "a ghost needs a second part";
  const SharedFolder folder("degree");
  const std::string store = folder.file("store");
  const std::string part = fs::path(partition::part_description_path(store, 1)).parent_path();
  if (world()->rank() == 0) {
    write_store_of(graph(1), store);
    // The last ghost row's degree, one more; the part's checksum and the manifest sealed again.
    const std::string file = (fs::path(part) / "degree.bin").string();
    io::StoredArray<std::int64_t> degree = io::read_array<std::int64_t>(file, false);
    degree.data.back() += 1;
    io::write_array<std::int64_t>(file, degree.data, degree.rows);
    reseal_part(store, 1);
  }
  world()->barrier();
  runtime::TrainJob job = small_job();
  job.partition_dir = store;

  expect_refused<FormatError>(job, {"part 1: ghost row", "in its degree.bin, but rank"});
}

// Issue 37: parts whose owned ids were edited and re-sealed (a vertex owned by two parts, another
// by none) trained without a word.
TEST(StoreJob, OwnedIdsThatDoNotCoverTheGraphOnceFailEveryRank) {
  if (world()->size() < 2) GTEST_SKIP() << "needs two parts";
  const SharedFolder folder("cover");
  const std::string store = folder.file("store");
  if (world()->rank() == 0) {
    write_store_of(graph(1), store);
    const partition::LocalGraph zero = partition::load_part(store, 0);
    const partition::LocalGraph one = partition::load_part(store, 1);
    // Part 1's first owned id becomes one of part 0's that keeps its ids ascending and is no
    // ghost of part 1: part 0 and part 1 both own it, and the old id no one.
    const auto in = [](const std::vector<GlobalId>& ids, GlobalId id) {
      return std::find(ids.begin(), ids.end(), id) != ids.end();
    };
    std::vector<GlobalId> owned = one.owned_ids;
    const auto taken = std::find_if(zero.owned_ids.begin(), zero.owned_ids.end(), [&](GlobalId id) {
      return id < owned[1] && !in(owned, id) && !in(one.ghost_ids, id);
    });
    ASSERT_NE(taken, zero.owned_ids.end());
    owned[0] = *taken;
    std::sort(owned.begin(), owned.end());
    const std::string file =
        (fs::path(partition::part_description_path(store, 1)).parent_path() / "owned_ids.bin")
            .string();
    io::write_array<GlobalId>(file, owned, static_cast<std::int64_t>(owned.size()));
    reseal_part(store, 1);
  }
  world()->barrier();
  runtime::TrainJob job = small_job();
  job.partition_dir = store;

  expect_refused<FormatError>(
      job, {"partition store '" + store + "'", "do not cover the graph's 600 vertices once each"});
}

TEST(StoreJob, ADatasetOfOneClassSaysSoOnEveryRank) {
  runtime::TrainJob job = small_job();
  job.dataset = "sbm:nodes=300,classes=1,avg-degree=6,p-in=0.8,features=8,noise=1";

  expect_refused<InvalidArgument>(job, {"1 class: at least 2 are needed"});
}

TEST(StoreJob, ADatasetOfOneNodeSaysSoOnEveryRank) {
  const SharedFolder folder("one-node");
  const std::string path = folder.file("one.npz");
  if (world()->rank() == 0) {
    datasets::Dataset tiny;
    tiny.name = "one";
    tiny.num_nodes = 1;
    tiny.adjacency = Csr(make_cpu_backend(1), 1, 1, 0);
    tiny.adjacency.row_ptr()[0] = tiny.adjacency.row_ptr()[1] = 0;
    Dense x(make_cpu_backend(1), 1, 2);
    x.data()[0] = x.data()[1] = 1.0f;
    tiny.features.dense = std::move(x);
    tiny.labels = {0};
    tiny.num_classes = 2;
    datasets::save_npz(tiny, path);
  }
  world()->barrier();
  runtime::TrainJob job = small_job();
  job.dataset = "npz:" + path;

  expect_refused<InvalidArgument>(job, {"1 node: at least 2 are needed"});
}

} // namespace
} // namespace tessera
