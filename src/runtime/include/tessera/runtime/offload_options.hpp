// The memory-budget flags, log line and report keys every training program shares (tessera-train
// and tessera-mlp run their models under the same chunk manager).
#pragma once

#include "tessera/core/report.hpp"
#include "tessera/engine/chunk_manager.hpp"

#include <string>

namespace CLI {
class App;
}

namespace tessera::runtime {

/// The flags as typed, parsed by offload_config.
struct OffloadFlags {
  std::string device_memory, host_memory, offload_dir;
  std::string chunk_size; ///< empty: 64MiB
  std::string eviction_policy; ///< empty: farthest-next-use
};

/// Adds --device-memory, --host-memory, --offload-dir, --chunk-size and --eviction-policy;
/// `tensors` says what moves ("parameters, gradients, Adam state and activations").
/// They are Tuning flags.
void add_offload_flags(CLI::App& app, OffloadFlags& flags, const std::string& tensors);
/// The configuration the flags ask for. Throws InvalidArgument naming the flag and its text: a
/// budget or chunk size of 0 (the flags are left out for no budget), and a --chunk-size or
/// --eviction-policy without a budget or tier for it to apply to.
OffloadConfig offload_config(const OffloadFlags& flags);
/// Whether `config` asks for a chunk manager at all (a budget or a tier).
bool uses_chunks(const OffloadConfig& config) noexcept;

/// "memory: chunks of 64 MiB, device budget 1 GiB, host tier unbounded, disk tier none; ...".
std::string describe_memory(const ChunkManager& memory);
/// "1.2 GiB moved (... host->device, ...), hit rate 97.0%, 0.10 s stalled; peak device ...".
std::string describe_offload(const OffloadStats& stats);
/// The budgets under `prefix` ("memory": chunk_bytes, device_budget_bytes, host_budget_bytes,
/// eviction_policy) and the statistics under `prefix`.offload (hits, moved bytes, ...).
void set_offload_report(RunReport& report, const std::string& prefix, const OffloadConfig& config,
                        const OffloadStats& stats);

} // namespace tessera::runtime
