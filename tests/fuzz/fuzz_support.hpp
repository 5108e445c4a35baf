// What every libFuzzer harness of tests/fuzz shares: a scratch folder of its own process, writing
// the fuzzer's bytes to files there, splitting one input into several files, and running a
// loader with Tessera's errors treated as the expected outcome.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::fuzz {

/// Separates the files of one input in harnesses that read several (LINQS content and cites,
/// MUSAE edges, targets and features, SNAP edges and labels). Seeds hold it; libFuzzer's
/// mutations keep it or drop it, and a missing file is written empty.
inline constexpr std::string_view kFileSeparator = "\n--tessera-fuzz-next-file--\n";

/// A folder of this process alone (under $TMPDIR, else /dev/shm, else /tmp; named by the pid so
/// parallel fuzzing jobs never share one), created on first use and removed at exit.
const std::string& scratch_dir();

/// Writes `bytes` to `path`, replacing it. Aborts on failure: a harness that cannot write its
/// input tests nothing, and that must not pass as a clean run.
void write_bytes(const std::string& path, std::string_view bytes);

/// The first `count` pieces of `data` cut at kFileSeparator; missing pieces are empty.
std::vector<std::string_view> split_files(const std::uint8_t* data, std::size_t size,
                                          std::size_t count);

/// The single-threaded CPU backend every harness loads into.
const BackendPtr& cpu();

/// Runs `load`; a tessera::Error is the expected outcome of a bad input and is swallowed. Any
/// other exception escapes to libFuzzer, which reports it as a finding (as it does crashes,
/// sanitizer reports, leaks, timeouts and the RSS limit).
template <typename Load> void expect_only_tessera_errors(Load&& load) {
  try {
    load();
  } catch (const tessera::Error&) {
  }
}

/// Writes a small valid partition store (2 parts of a 40-node SBM graph with labels, features
/// and a split) to `dir`: the template the manifest and part.json harnesses corrupt, and the
/// source of their seeds.
void write_small_store(const std::string& dir);

/// The epoch folder write_small_checkpoint's checkpoint is in.
inline constexpr std::string_view kSmallCheckpointFolder = "epoch-000005";

/// Writes a small valid checkpoint (epoch 5 of a 2-layer GCN, 3 -> 4 -> 2, with Adam state) into
/// the folder `dir`, created: the checkpoint harness's template and the source of its seeds.
void write_small_checkpoint(const std::string& dir);

} // namespace tessera::fuzz
