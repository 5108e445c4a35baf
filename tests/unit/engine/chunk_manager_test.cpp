// The chunk manager on the CPU backend: bytes survive every tier, the budget holds, the policy
// is Belady's, bad budgets, tensors and folders get errors that name them, and row blocks (how a
// layer larger than the budget runs) acquire each block while it computes.
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/row_blocks.hpp"
#include "tessera/engine/sequential.hpp"

// GCC 12 reports a false -Wrestrict in std::string copies inlined into these tests (GCC bug
// 105329); the code is plain string passing.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <random>
#include <unistd.h>
#include <vector>

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kChunk = std::size_t{64} << 10; // 16 pages

/// "t3" and the like.
std::string tensor_name(int i) {
  std::string name = "t";
  name += std::to_string(i);
  return name;
}

OffloadConfig small_config(std::size_t device_chunks, std::size_t host_chunks = 0) {
  OffloadConfig config;
  config.chunk_bytes = kChunk;
  config.device_bytes = device_chunks * kChunk;
  config.host_bytes = host_chunks * kChunk;
  config.address_space_bytes = std::size_t{1} << 30;
  return config;
}

/// Writes a pattern keyed by `seed` into tensor `id` (acquired for writing, then released).
void write_pattern(ChunkManager& m, int id, std::size_t bytes, int seed) {
  auto* data = m.acquire(id, Access::Write);
  for (std::size_t i = 0; i < bytes; ++i)
    data[i] = std::byte(static_cast<unsigned>(i * 7 + seed));
  m.release(id);
}

bool has_pattern(ChunkManager& m, int id, std::size_t bytes, int seed) {
  const auto* data = m.acquire(id, Access::Read);
  bool same = true;
  for (std::size_t i = 0; i < bytes && same; ++i) {
    same = data[i] == std::byte(static_cast<unsigned>(i * 7 + seed));
  }
  m.release(id);
  return same;
}

/// This process's resident bytes now (/proc/self/statm), not its peak: what a live object holds
/// whatever ran before in the process.
std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("tessera-chunks-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(ChunkManager, WithoutBudgetNothingMovesAndAddressesStay) {
  ChunkManager m(make_cpu_backend(1), small_config(0));
  const TensorSlot a = m.allocate("a", TensorKind::Activation, 3 * kChunk + 5);
  const TensorSlot b = m.allocate("b", TensorKind::Weight, 100);

  write_pattern(m, a.id, a.bytes, 1);
  write_pattern(m, b.id, b.bytes, 2);

  EXPECT_EQ(m.acquire(a.id, Access::Read), a.data);
  m.release(a.id);
  EXPECT_TRUE(has_pattern(m, a.id, a.bytes, 1));
  EXPECT_TRUE(has_pattern(m, b.id, b.bytes, 2));
  EXPECT_EQ(m.total().moved_bytes(), 0u);
  EXPECT_EQ(m.total().evictions, 0u);
}

TEST(ChunkManager, BytesSurviveEvictionToTheHostTier) {
  ChunkManager m(make_cpu_backend(1), small_config(2));
  std::vector<TensorSlot> tensors;
  for (int i = 0; i < 8; ++i) {
    tensors.push_back(m.allocate(tensor_name(i), TensorKind::Activation, kChunk));
  }

  for (int i = 0; i < 8; ++i)
    write_pattern(m, tensors[i].id, kChunk, i);

  for (int i = 7; i >= 0; --i)
    EXPECT_TRUE(has_pattern(m, tensors[i].id, kChunk, i)) << i;
  EXPECT_GT(m.total().evictions, 0u);
  EXPECT_GT(m.total().device_to_host_bytes, 0u);
  EXPECT_LE(m.total().peak_device_bytes, 2 * kChunk);
}

TEST(ChunkManager, BytesSurviveTheDiskTierAndItsFileIsGoneAfterwards) {
  TempDir dir;
  OffloadConfig config = small_config(2, 2); // tensors straddle chunks: two at once
  config.offload_dir = dir.path.string();
  {
    ChunkManager m(make_cpu_backend(1), config);
    std::vector<TensorSlot> tensors;
    for (int i = 0; i < 6; ++i) {
      tensors.push_back(m.allocate(tensor_name(i), TensorKind::Weight, kChunk - 64));
    }

    for (int i = 0; i < 6; ++i)
      write_pattern(m, tensors[i].id, tensors[i].bytes, 10 + i);

    for (int i = 0; i < 6; ++i) {
      EXPECT_TRUE(has_pattern(m, tensors[i].id, tensors[i].bytes, 10 + i)) << i;
    }
    EXPECT_GT(m.total().host_to_disk_bytes, 0u);
    EXPECT_GT(m.total().disk_to_host_bytes, 0u);
    EXPECT_LE(m.total().peak_host_bytes, 2 * kChunk);
    EXPECT_LE(m.total().peak_device_bytes, 2 * kChunk);
  }
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(ChunkManager, ReadOnlyChunksAreDroppedNotWrittenBack) {
  ChunkManager m(make_cpu_backend(1), small_config(1));
  const TensorSlot a = m.allocate("features a", TensorKind::Input, kChunk);
  const TensorSlot b = m.allocate("features b", TensorKind::Input, kChunk);
  write_pattern(m, a.id, kChunk, 1);
  write_pattern(m, b.id, kChunk, 2);
  const std::uint64_t written_back = m.total().device_to_host_bytes;

  for (int round = 0; round < 3; ++round) {
    EXPECT_TRUE(has_pattern(m, a.id, kChunk, 1));
    EXPECT_TRUE(has_pattern(m, b.id, kChunk, 2));
  }

  EXPECT_EQ(m.total().device_to_host_bytes, written_back + kChunk); // b's first eviction only
  EXPECT_GT(m.total().dropped_bytes, 0u);
}

TEST(ChunkManager, AWriteThatCoversAChunkDoesNotCopyItIn) {
  ChunkManager m(make_cpu_backend(1), small_config(1));
  const TensorSlot a = m.allocate("a", TensorKind::Activation, 2 * kChunk);
  const TensorSlot b = m.allocate("b", TensorKind::Activation, 2 * kChunk);
  const auto write_parts = [&](const TensorSlot& t) {
    for (std::size_t part = 0; part < 2; ++part) { // whole chunks, one at a time
      std::memset(m.acquire(t.id, Access::Write, part * kChunk, kChunk), 1, kChunk);
      m.release(t.id, part * kChunk, kChunk);
    }
  };
  write_parts(a);
  write_parts(b);
  const std::uint64_t before = m.total().host_to_device_bytes;

  write_parts(a);
  write_parts(b);

  EXPECT_EQ(m.total().host_to_device_bytes, before);
}

TEST(ChunkManager, DiscardedChunksLeaveWithoutWriteBackAndFreeTheirHostCopies) {
  // One device slot and three host chunks, no disk tier: the four chunks with data fit only
  // because the dead one's host copy is free for another.
  ChunkManager m(make_cpu_backend(1), small_config(1, 3));
  const TensorSlot dead = m.allocate("layer output", TensorKind::Activation, kChunk);
  const TensorSlot saved = m.allocate("saved for backward", TensorKind::Activation, kChunk);
  const TensorSlot half = m.allocate("half a chunk", TensorKind::Gradient, kChunk / 2);
  const TensorSlot other = m.allocate("its neighbour", TensorKind::Gradient, kChunk / 4);
  for (const TensorSlot& t : {dead, saved, half, other})
    write_pattern(m, t.id, t.bytes, t.id); // all but the last leave the device for the host

  m.discard(dead.data, dead.bytes);
  m.discard(half.data, half.bytes);       // its chunk also holds `other`, which is live
  m.discard(saved.data, saved.bytes / 2); // part of a tensor: left alone
  const TensorSlot weight = m.allocate("weight", TensorKind::Weight, kChunk);
  write_pattern(m, weight.id, weight.bytes, weight.id);
  m.discard(weight.data, weight.bytes); // not an activation or gradient: left alone
  const OffloadStats before = m.total();
  for (const TensorSlot& t : {saved, other, weight}) // all that is live comes back intact
    EXPECT_TRUE(has_pattern(m, t.id, t.bytes, t.id)) << m.name(t.id);
  EXPECT_EQ(m.total().host_to_device_bytes - before.host_to_device_bytes, 3 * kChunk);

  // Its last live tensor discarded, the shared chunk gives its host copy back too (the room the
  // rest needs).
  m.discard(other.data, other.bytes);

  // Discarded while on the device: it leaves without being written back.
  write_pattern(m, dead.id, dead.bytes, 7);
  m.discard(dead.data, dead.bytes);
  const std::uint64_t written_back = m.total().device_to_host_bytes;
  EXPECT_TRUE(has_pattern(m, saved.id, saved.bytes, saved.id));
  EXPECT_EQ(m.total().device_to_host_bytes, written_back);

  // Rewritten, it holds data again: written back when it leaves.
  write_pattern(m, dead.id, dead.bytes, 8);
  EXPECT_TRUE(has_pattern(m, saved.id, saved.bytes, saved.id));
  EXPECT_TRUE(has_pattern(m, dead.id, dead.bytes, 8));
  EXPECT_LE(m.total().peak_device_bytes, kChunk);
}

TEST(ChunkManager, SequentialDiscardsWhatNoLaterCallReads) {
  // An MLP whose activations outweigh its parameters, under a budget that holds a whole step.
  ChunkManager m(make_cpu_backend(1), small_config(256));
  const BackendPtr memory = m.allocator(TensorKind::Activation);
  Sequential<float> model;
  model.add(std::make_unique<Linear<float>>(memory, 16, 64, true, 1, 0));
  model.add(std::make_unique<Relu<float>>(memory));
  model.add(std::make_unique<Linear<float>>(memory, 64, 64, true, 1, 1));
  model.add(std::make_unique<Relu<float>>(memory));
  model.add(std::make_unique<Linear<float>>(memory, 64, 4, true, 1, 2));
  model.use_memory(&m);
  const BackendPtr cpu = make_cpu_backend(1);
  DenseT<float> x = DenseT<float>::zeros(cpu, 2048, 16), dy = DenseT<float>::zeros(cpu, 2048, 4);
  x.fill(0.5f);
  dy.fill(1.0f);

  model.forward(Step{}, x.cview());
  model.backward(dy.cview());
  const std::uint64_t transient = m.tensor_bytes(TensorKind::Activation);
  const std::uint64_t written_back = m.total().device_to_host_bytes;
  m.settle(); // the parameters, written at construction, are acquired until now
  const TensorSlot pressure = m.allocate("pressure", TensorKind::Weight, 255 * kChunk);
  m.acquire(pressure.id, Access::Write); // all other chunks but one leave the device

  // (Nearly) everything left the device for `pressure`. What is written back: the logits (the
  // caller's), the parameters and their gradients — not the outputs and input gradients in between
  // (2 MiB: the ReLUs run in place over the Linears' outputs and gradients), each discarded once
  // its last reader ran.
  EXPECT_GT(transient, 2 * (std::size_t{1} << 20));
  EXPECT_LE(m.total().device_to_host_bytes - written_back, 8 * kChunk);
}

TEST(ChunkManager, PartsOfATensorLargerThanTheBudgetComeInOneAtATime) {
  ChunkManager m(make_cpu_backend(1), small_config(2));
  const TensorSlot big = m.allocate("activation of layer 1", TensorKind::Activation, 5 * kChunk);

  for (std::size_t part = 0; part < 5; ++part) {
    auto* data = m.acquire(big.id, Access::Write, part * kChunk, kChunk);
    std::memset(data, static_cast<int>(part + 1), kChunk);
    m.release(big.id, part * kChunk, kChunk);
  }

  for (std::size_t part = 0; part < 5; ++part) {
    const auto* data = m.acquire(big.id, Access::Read, part * kChunk, kChunk);
    EXPECT_EQ(data, big.data + part * kChunk);
    EXPECT_EQ(data[0], std::byte(part + 1));
    EXPECT_EQ(data[kChunk - 1], std::byte(part + 1));
    m.release(big.id, part * kChunk, kChunk);
  }
  EXPECT_LE(m.total().peak_device_bytes, 2 * kChunk);
}

TEST(ChunkManager, ABudgetSmallerThanOneChunkIsRefused) {
  OffloadConfig config = small_config(0);
  config.device_bytes = kChunk / 2;

  try {
    ChunkManager m(make_cpu_backend(1), config);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("device memory budget 32 KiB"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("smaller than one chunk"), std::string::npos) << e.what();
  }
}

TEST(ChunkManager, AChunkSizeOffTheGranularityIsRefused) {
  OffloadConfig config = small_config(0);
  config.chunk_bytes = 1000;

  EXPECT_THROW(ChunkManager(make_cpu_backend(1), config), InvalidArgument);
}

TEST(ChunkManager, ATensorLargerThanTheBudgetIsNamed) {
  ChunkManager m(make_cpu_backend(1), small_config(2));
  const TensorSlot big = m.allocate("conv1.output", TensorKind::Activation, 3 * kChunk);

  try {
    m.acquire(big.id, Access::Write);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("'conv1.output'"), std::string::npos) << text;
    EXPECT_NE(text.find("device memory budget (128 KiB"), std::string::npos) << text;
  }
}

TEST(ChunkManager, TooManyPinnedChunksAreReportedNotExceeded) {
  ChunkManager m(make_cpu_backend(1), small_config(2));
  const TensorSlot a = m.allocate("a", TensorKind::Activation, kChunk);
  const TensorSlot b = m.allocate("b", TensorKind::Activation, kChunk);
  const TensorSlot c = m.allocate("c", TensorKind::Activation, kChunk);
  m.acquire(a.id, Access::Write);
  m.acquire(b.id, Access::Write);

  EXPECT_THROW(m.acquire(c.id, Access::Write), InvalidArgument);
  EXPECT_LE(m.total().peak_device_bytes, 2 * kChunk);

  m.release(a.id);
  EXPECT_NO_THROW(m.acquire(c.id, Access::Write));
  m.release(b.id);
  m.release(c.id);
}

TEST(ChunkManager, AFullHostTierWithoutADiskTierSaysWhatToGive) {
  ChunkManager m(make_cpu_backend(1), small_config(1, 1));

  try { // the third weight cannot go anywhere (when allocated, or when written)
    for (int i = 0; i < 3; ++i) {
      const TensorSlot t = m.allocate("w" + std::to_string(i), TensorKind::Weight, kChunk);
      write_pattern(m, t.id, kChunk, i);
    }
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("an offload folder"), std::string::npos) << e.what();
  }
}

TEST(ChunkManager, AShortDiskWriteNamesTheOffloadFile) {
  TempDir dir;
  OffloadConfig config = small_config(1, 1);
  config.offload_dir = dir.path.string();
  config.fail_disk_writes_after = kChunk + kChunk / 2;
  ChunkManager m(make_cpu_backend(1), config);

  try {
    for (int i = 0; i < 4; ++i) {
      const TensorSlot t = m.allocate("w", TensorKind::Weight, kChunk);
      write_pattern(m, t.id, kChunk, 0);
    }
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    const std::string text = e.what();
    const std::string file = (dir.path / "tessera-offload-rank0-").string();
    EXPECT_NE(text.find(file), std::string::npos) << text;
    EXPECT_NE(text.find("no space left"), std::string::npos) << text;
  }
}

TEST(ChunkManager, AnOffloadDirThatIsNotAFolderIsRefusedSayingWhatItIs) {
  const fs::path file =
      fs::temp_directory_path() / ("tessera-offload-file-" + std::to_string(getpid()));
  std::ofstream(file) << "a file";
  for (const std::string& dir : {file.string(), std::string("/dev/null")}) {
    OffloadConfig config = small_config(1);
    config.offload_dir = dir;

    try {
      ChunkManager m(make_cpu_backend(1), config);
      ADD_FAILURE() << "expected IoError for " << dir;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("offload folder " + dir + ": it is a "),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(", not a folder"), std::string::npos) << e.what();
    }
  }
  fs::remove(file);
}

// Issue 37: a folder that does not exist yet is made, as --checkpoint-dir's is, and removed
// again with the manager that made it.
TEST(ChunkManager, AMissingOffloadDirIsMadeAndRemovedWithTheManager) {
  const fs::path root =
      fs::temp_directory_path() / ("tessera-offload-made-" + std::to_string(getpid()));
  OffloadConfig config = small_config(1);
  config.offload_dir = (root / "a" / "b").string();
  {
    const ChunkManager m(make_cpu_backend(1), config);

    EXPECT_TRUE(fs::is_directory(root / "a" / "b"));
  }
  EXPECT_FALSE(fs::exists(root));
}

TEST(ChunkManagerDeathTest, TouchingAnEvictedChunkFaultsInsteadOfReadingStaleBytes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ChunkManager m(make_cpu_backend(1), small_config(1));
  const TensorSlot a = m.allocate("a", TensorKind::Activation, kChunk);
  const TensorSlot b = m.allocate("b", TensorKind::Activation, kChunk);
  write_pattern(m, a.id, kChunk, 1);
  write_pattern(m, b.id, kChunk, 2); // evicts a

  EXPECT_DEATH(
      {
        volatile std::byte x = a.data[0];
        (void)x;
      },
      "");
}

TEST(ChunkManager, FormatsByteSizes) {
  EXPECT_EQ(format_bytes(std::size_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(std::size_t{64} << 20), "64 MiB");
  EXPECT_EQ(format_bytes(512), "512 B");
}

// ---- Policy ----------------------------------------------------------------------------

/// The fewest misses any eviction choice achieves on `trace` with `capacity` slots, starting from
/// `resident` (dynamic programming over (position, resident set): the brute-force optimum).
int optimal_misses(const std::vector<int>& trace, int chunks, int capacity, unsigned resident) {
  std::map<std::pair<std::size_t, unsigned>, int> memo;
  std::function<int(std::size_t, unsigned)> best = [&](std::size_t i, unsigned set) -> int {
    if (i == trace.size()) return 0;
    const auto key = std::make_pair(i, set);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const unsigned bit = 1u << trace[i];
    int result;
    if (set & bit) {
      result = best(i + 1, set);
    } else if (std::popcount(set) < capacity) {
      result = 1 + best(i + 1, set | bit);
    } else {
      result = 1 << 30;
      for (int c = 0; c < chunks; ++c) {
        if (set & (1u << c)) result = std::min(result, 1 + best(i + 1, (set & ~(1u << c)) | bit));
      }
    }
    return memo[key] = result;
  };
  return best(0, resident);
}

struct PolicyRun {
  std::uint64_t misses = 0;
  std::uint64_t moved = 0;
};

/// Runs `trace` (one acquire per entry of one-chunk tensors) for three epochs and reports the
/// third (the second records the trace).
PolicyRun run_trace(const std::vector<int>& trace, int chunks, int capacity,
                    EvictionPolicy policy) {
  OffloadConfig config = small_config(static_cast<std::size_t>(capacity));
  config.policy = policy;
  config.prefetch_depth = 0;
  ChunkManager m(make_cpu_backend(1), config);
  std::vector<TensorSlot> tensors;
  for (int c = 0; c < chunks; ++c) {
    tensors.push_back(m.allocate(tensor_name(c), TensorKind::Weight, kChunk));
  }
  PolicyRun run;
  for (int epoch = 0; epoch < 3; ++epoch) {
    m.begin_epoch();
    for (int c : trace) {
      m.acquire(tensors[c].id, Access::ReadWrite);
      m.release(tensors[c].id);
    }
    const OffloadStats stats = m.end_epoch();
    if (epoch == 2) {
      run.misses = stats.misses;
      run.moved = stats.moved_bytes();
    }
  }
  return run;
}

TEST(ChunkManagerPolicy, FarthestNextUseMissesNoMoreThanTheBruteForceOptimum) {
  std::mt19937 random(7);
  for (int round = 0; round < 20; ++round) {
    const int chunks = 7, capacity = 3;
    std::vector<int> trace(30);
    for (int& c : trace)
      c = static_cast<int>(random() % chunks);

    // The third epoch starts from what the second left resident: LRU (no trace yet) left the
    // `capacity` most recently used chunks.
    OffloadConfig config = small_config(capacity);
    config.prefetch_depth = 0;
    ChunkManager m(make_cpu_backend(1), config);
    std::vector<TensorSlot> tensors;
    for (int c = 0; c < chunks; ++c) {
      tensors.push_back(m.allocate(tensor_name(c), TensorKind::Weight, kChunk));
    }
    std::uint64_t misses = 0;
    unsigned start = 0;
    for (int epoch = 0; epoch < 3; ++epoch) {
      m.begin_epoch();
      for (int c : trace) {
        m.acquire(tensors[c].id, Access::ReadWrite);
        m.release(tensors[c].id);
      }
      if (epoch == 1) {
        // LRU leaves the `capacity` most recently used distinct chunks resident.
        int found = 0;
        for (auto it = trace.rbegin(); it != trace.rend() && found < capacity; ++it) {
          if (!(start & (1u << *it))) {
            start |= 1u << *it;
            ++found;
          }
        }
      }
      const OffloadStats stats = m.end_epoch();
      if (epoch == 2) misses = stats.misses;
    }

    EXPECT_EQ(misses, static_cast<std::uint64_t>(optimal_misses(trace, chunks, capacity, start)))
        << "round " << round;
  }
}

TEST(ChunkManagerPolicy, FarthestNextUseMovesFewerBytesThanLruOnALoopingTrace) {
  // A loop over more chunks than fit: LRU evicts exactly the chunk needed next (every touch
  // misses); Belady keeps most of the loop resident.
  std::vector<int> trace;
  for (int pass = 0; pass < 4; ++pass) {
    for (int c = 0; c < 5; ++c)
      trace.push_back(c);
  }

  const PolicyRun lru = run_trace(trace, 5, 3, EvictionPolicy::Lru);
  const PolicyRun belady = run_trace(trace, 5, 3, EvictionPolicy::FarthestNextUse);

  EXPECT_EQ(lru.misses, trace.size());
  EXPECT_LT(belady.misses, lru.misses);
  EXPECT_LT(belady.moved, lru.moved);
}

TEST(ChunkManagerPolicy, WorkAheadBringsInTheChunksTheTraceNeedsNext) {
  // Six one-chunk tensors read in a loop, three slots, no prefetch on acquire: every touch of
  // an epoch misses. Called before the third epoch (as a halo wait would), work_ahead brings
  // in the trace's next three chunks one call each, evicting the ones needed last (read-only:
  // nothing to write back), then says there is nothing more worth doing; those three touches
  // hit and the bytes are intact.
  OffloadConfig config = small_config(3, 6);
  config.prefetch_depth = 0;
  ChunkManager m(make_cpu_backend(1), config);
  std::vector<TensorSlot> tensors;
  for (int c = 0; c < 6; ++c) {
    tensors.push_back(m.allocate(tensor_name(c), TensorKind::Weight, kChunk));
    write_pattern(m, tensors.back().id, kChunk, c);
  }
  const auto run_epoch = [&](bool idle_first) {
    m.begin_epoch();
    int calls = 0;
    while (idle_first && m.work_ahead())
      ++calls;
    for (const TensorSlot& t : tensors) {
      m.acquire(t.id, Access::Read);
      m.release(t.id);
    }
    return std::make_pair(calls, m.end_epoch());
  };
  EXPECT_FALSE(m.work_ahead()); // no trace recorded yet
  run_epoch(false);
  const OffloadStats without = run_epoch(false).second; // records the trace

  const auto [calls, with] = run_epoch(true);

  EXPECT_EQ(without.misses, 6u);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(with.wait_prefetches, 3u);
  EXPECT_EQ(with.prefetches, 3u);
  EXPECT_EQ(with.hits, 3u);
  EXPECT_EQ(with.misses, 3u);
  EXPECT_GT(with.wait_copy_seconds, 0.0);
  for (int c = 0; c < 6; ++c)
    EXPECT_TRUE(has_pattern(m, tensors[static_cast<std::size_t>(c)].id, kChunk, c)) << c;
}

TEST(ChunkManager, CopiesThroughTheAllocatorBringInWhatTheyTouch) {
  // A matrix made outside any scope: allocating its columns and values evicts its row pointers
  // (about 4 + 4 + 1 chunks of a 6-chunk budget), which the copies into it must bring back.
  ChunkManager m(make_cpu_backend(1), small_config(6));
  const BackendPtr matrices = m.allocator(TensorKind::Matrix);
  const BackendPtr cpu = make_cpu_backend(1);
  const std::int64_t rows = 1000, nnz = 4 * kChunk / 4 - 100;
  Csr host(cpu, rows, rows, nnz);
  for (std::int64_t i = 0; i <= rows; ++i)
    host.row_ptr()[i] = i * nnz / rows;
  for (std::int64_t k = 0; k < nnz; ++k) {
    host.col()[k] = static_cast<LocalId>(k % rows);
    host.val()[k] = static_cast<float>(k);
  }

  const Csr managed = to_backend(host, matrices);
  const Csr back = to_backend(managed, cpu);
  Dense zeroed = Dense::zeros(matrices, 8, 1);

  EXPECT_TRUE(std::equal(host.row_ptr(), host.row_ptr() + rows + 1, back.row_ptr()));
  EXPECT_TRUE(std::equal(host.col(), host.col() + nnz, back.col()));
  EXPECT_TRUE(std::equal(host.val(), host.val() + nnz, back.val()));
  EXPECT_EQ(to_backend(zeroed, cpu).data()[7], 0.0f);
  EXPECT_GT(m.total().device_to_host_bytes, 0u);
  EXPECT_LE(m.total().peak_device_bytes, 6 * kChunk);
}

TEST(ChunkManager, AFineChunkSizeOverAWideAddressSpaceCostsNoTablePerAddress) {
  // 4 KiB chunks over the default 1 TiB reservation: 2^28 possible chunks, of which a few hold
  // tensors. A table with an entry per possible chunk would take a GiB.
  OffloadConfig config;
  config.chunk_bytes = std::size_t{4} << 10;
  config.device_bytes = std::size_t{64} << 10;
  const std::int64_t before = resident_bytes();

  ChunkManager m(make_cpu_backend(1), config);
  const TensorSlot t = m.allocate("t", TensorKind::Activation, std::size_t{32} << 10);
  write_pattern(m, t.id, t.bytes, 3);

  EXPECT_TRUE(has_pattern(m, t.id, t.bytes, 3));
  EXPECT_LT(resident_bytes() - before, std::int64_t{64} << 20); // while the manager lives
}

TEST(RowBlocks, WithoutABudgetOneCallCoversEveryRow) {
  std::vector<std::pair<std::int64_t, std::int64_t>> calls;

  for_row_blocks(nullptr, 1000, {},
                 [&](std::int64_t b, std::int64_t e) { calls.emplace_back(b, e); });

  EXPECT_EQ(calls, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 1000}}));
}

TEST(RowBlocks, UnderABudgetEachBlockIsOnTheDeviceWhileItRuns) {
  // [4096, 64] floats = 16 chunks of a 4-chunk budget, written and read back block by block.
  ChunkManager m(make_cpu_backend(1), small_config(4));
  Dense x(m.allocator(TensorKind::Activation), 4096, 64);
  std::int64_t next = 0, blocks = 0;

  for_row_blocks(&m, x.rows(), {rows_of(x.cview(), Access::Write)},
                 [&](std::int64_t b, std::int64_t e) {
                   EXPECT_EQ(b, next);
                   next = e;
                   ++blocks;
                   for (std::int64_t r = b; r < e; ++r)
                     x.data()[r * 64] = static_cast<float>(r); // faults unless acquired
                 });
  std::vector<float> back(4096 * 64);
  x.backend()->copy_to_host(back.data(), x.data(), x.bytes());

  EXPECT_EQ(next, 4096);
  EXPECT_GE(blocks, 16); // an eighth of the budget per block: half a chunk
  for (std::int64_t r = 0; r < 4096; r += 511)
    EXPECT_EQ(back[static_cast<std::size_t>(r * 64)], static_cast<float>(r));
  EXPECT_LE(m.total().peak_device_bytes, 4 * kChunk);
}

TEST(RowBlocks, ASparseMatrixsBlocksAcquireTheirOffsetsAndEntriesOnly) {
  // 20000 rows of 0-16 entries (~23 chunks of offsets, columns and values) under 4: each
  // block reads its rows' offsets and entries, which fault unless acquired.
  constexpr std::int64_t kRows = 20000;
  Csr host(make_cpu_backend(1), kRows, 64, 0);
  {
    std::vector<Offset> row_ptr{0};
    std::vector<LocalId> col;
    for (std::int64_t r = 0; r < kRows; ++r) {
      for (std::int64_t k = 0; k < r % 17; ++k)
        col.push_back(static_cast<LocalId>(k));
      row_ptr.push_back(static_cast<Offset>(col.size()));
    }
    host = Csr(make_cpu_backend(1), kRows, 64, static_cast<std::int64_t>(col.size()));
    std::copy(row_ptr.begin(), row_ptr.end(), host.row_ptr());
    std::copy(col.begin(), col.end(), host.col());
    for (std::int64_t k = 0; k < host.nnz(); ++k)
      host.val()[k] = static_cast<float>(k % 7);
  }
  ChunkManager m(make_cpu_backend(1), small_config(4));
  const BackendPtr inputs = m.allocator(TensorKind::Input);
  const Csr x = to_backend(host, inputs);
  SparseRows sparse;
  double sum = 0.0;
  std::int64_t next = 0, blocks = 0;

  for_row_blocks(&m, kRows, sparse.of(*inputs, x.view(), Access::Read),
                 [&](std::int64_t b, std::int64_t e) {
                   EXPECT_EQ(b, next);
                   next = e;
                   ++blocks;
                   for (std::int64_t r = b; r < e; ++r)
                     for (Offset k = x.row_ptr()[r]; k < x.row_ptr()[r + 1]; ++k)
                       sum += x.val()[k] * (x.col()[k] + 1);
                 });

  double expected = 0.0;
  for (std::int64_t k = 0; k < host.nnz(); ++k)
    expected += host.val()[k] * (host.col()[k] + 1);
  EXPECT_EQ(next, kRows);
  EXPECT_GE(blocks, 8);
  EXPECT_EQ(sum, expected);
  EXPECT_EQ(sparse.offsets()[kRows], host.nnz());
  EXPECT_LE(m.total().peak_device_bytes, 4 * kChunk);
}

TEST(RowBlocks, RowIdsOfABlockStartAtItsFirstRow) {
  const GlobalId ids[] = {7, 8, 9, 10};
  EXPECT_EQ(rows_from(RowIds{ids, 0}, 2)(0), 9);
  EXPECT_EQ(rows_from(RowIds{nullptr, 100}, 3)(1), 104);
}

} // namespace
} // namespace tessera

namespace tessera {
namespace {

TEST(ChunkManager, BuffersAllocatedOutsideAScopeMakeRoomForEachOther) {
  ChunkManager m(make_cpu_backend(1), small_config(16));
  const BackendPtr weights = m.allocator(TensorKind::Weight);
  std::vector<Dense> tensors;

  for (int i = 0; i < 6; ++i)
    tensors.push_back(Dense::zeros(weights, 1433, 64)); // 6 chunks each

  EXPECT_LE(m.total().peak_device_bytes, 16 * kChunk);
}

} // namespace
} // namespace tessera
