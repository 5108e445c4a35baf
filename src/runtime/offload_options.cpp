// Memory-budget flags, log line and report keys shared by the training programs.
#include "tessera/runtime/offload_options.hpp"

#include "tessera/runtime/cli_options.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

namespace tessera::runtime {

void add_offload_flags(CLI::App& app, OffloadFlags& flags, const std::string& tensors) {
  app.add_option("--device-memory", flags.device_memory,
                 "device budget (e.g. 1GiB) for " + tensors +
                     ": they move in chunks between device, host and disk tiers");
  app.add_option("--host-memory", flags.host_memory,
                 "host tier budget (pinned memory), e.g. 4GiB; beyond it chunks go to "
                 "--offload-dir");
  add_path_option(app, "--offload-dir", flags.offload_dir,
                  "folder for the disk tier (one file per rank, removed at exit; the folder is "
                  "created when missing, and removed again if the run made it)");
  app.add_option("--chunk-size", flags.chunk_size, "bytes per chunk (default 64MiB)");
  app.add_option("--eviction-policy", flags.eviction_policy,
                 "which chunk leaves the device when a slot is needed: farthest-next-use (the "
                 "default; Belady over the recorded trace of an epoch) or lru")
      ->check(CLI::IsMember({"farthest-next-use", "lru"}));
  group_flags(
      app, kTuningFlags,
      {"--device-memory", "--host-memory", "--offload-dir", "--chunk-size", "--eviction-policy"});
}

namespace {

/// A size flag that must be above 0: 0 would read as "no budget" or be ignored.
std::size_t positive_byte_size(const std::string& text, const std::string& flag,
                               const std::string& without) {
  const std::size_t bytes = parse_byte_size(text, flag);
  if (bytes == 0) {
    throw InvalidArgument(flag + " " + text + ": expects a size above 0 (" + without + ")");
  }
  return bytes;
}

} // namespace

OffloadConfig offload_config(const OffloadFlags& flags) {
  OffloadConfig config;
  if (!flags.device_memory.empty()) {
    config.device_bytes = positive_byte_size(flags.device_memory, "--device-memory",
                                             "leave the flag out for no device budget");
  }
  if (!flags.host_memory.empty()) {
    config.host_bytes = positive_byte_size(flags.host_memory, "--host-memory",
                                           "leave the flag out for an unbounded host tier");
  }
  config.offload_dir = flags.offload_dir;
  if (!flags.chunk_size.empty()) {
    config.chunk_bytes = positive_byte_size(flags.chunk_size, "--chunk-size", "64MiB by default");
    if (!uses_chunks(config)) {
      throw InvalidArgument("--chunk-size sizes the chunks of a memory budget: it needs "
                            "--device-memory, --host-memory or --offload-dir");
    }
  }
  if (!flags.eviction_policy.empty()) {
    config.policy = parse_eviction_policy(flags.eviction_policy);
    if (!uses_chunks(config)) {
      throw InvalidArgument("--eviction-policy chooses among the chunks of a memory budget: it "
                            "needs --device-memory, --host-memory or --offload-dir");
    }
  }
  return config;
}

bool uses_chunks(const OffloadConfig& config) noexcept {
  return config.device_bytes != 0 || config.host_bytes != 0 || !config.offload_dir.empty();
}

std::string describe_memory(const ChunkManager& memory) {
  const OffloadConfig& config = memory.config();
  return fmt::format("memory: chunks of {}, device budget {} ({} chunks), host tier {}, disk "
                     "tier {}; {} eviction",
                     format_bytes(config.chunk_bytes),
                     memory.budgeted() ? format_bytes(config.device_bytes) : "none",
                     memory.budgeted() ? std::to_string(memory.device_slots()) : "all",
                     config.host_bytes != 0 ? format_bytes(config.host_bytes) : "unbounded",
                     config.offload_dir.empty() ? "none" : config.offload_dir,
                     to_string(config.policy));
}

std::string describe_offload(const OffloadStats& o) {
  return fmt::format("{} moved ({} host->device, {} device->host, {} disk->host, {} host->disk), "
                     "hit rate {:.1f}%, {:.2f} s stalled ({} chunks brought in during halo "
                     "waits, {:.2f} s); peak device {}, host {}, disk {}; footprint {}",
                     format_bytes(o.moved_bytes()), format_bytes(o.host_to_device_bytes),
                     format_bytes(o.device_to_host_bytes), format_bytes(o.disk_to_host_bytes),
                     format_bytes(o.host_to_disk_bytes), 100.0 * o.hit_rate(), o.stall_seconds,
                     o.wait_prefetches, o.wait_copy_seconds, format_bytes(o.peak_device_bytes),
                     format_bytes(o.peak_host_bytes), format_bytes(o.peak_disk_bytes),
                     format_bytes(o.peak_tensor_bytes));
}

void set_offload_report(RunReport& report, const std::string& prefix, const OffloadConfig& config,
                        const OffloadStats& s) {
  const auto bytes = [](std::uint64_t b) { return static_cast<std::int64_t>(b); };
  report.set(prefix + ".chunk_bytes", bytes(config.chunk_bytes));
  report.set(prefix + ".device_budget_bytes", bytes(config.device_bytes));
  report.set(prefix + ".host_budget_bytes", bytes(config.host_bytes));
  report.set(prefix + ".eviction_policy", to_string(config.policy));
  const std::string o = prefix + ".offload";
  report.set(o + ".hits", bytes(s.hits));
  report.set(o + ".misses", bytes(s.misses));
  report.set(o + ".hit_rate", s.hit_rate());
  report.set(o + ".input_hit_rate", s.input_hit_rate());
  report.set(o + ".evictions", bytes(s.evictions));
  report.set(o + ".prefetches", bytes(s.prefetches));
  report.set(o + ".host_to_device_bytes", bytes(s.host_to_device_bytes));
  report.set(o + ".device_to_host_bytes", bytes(s.device_to_host_bytes));
  report.set(o + ".disk_to_host_bytes", bytes(s.disk_to_host_bytes));
  report.set(o + ".host_to_disk_bytes", bytes(s.host_to_disk_bytes));
  report.set(o + ".dropped_bytes", bytes(s.dropped_bytes));
  report.set(o + ".moved_bytes", bytes(s.moved_bytes()));
  report.set(o + ".stall_s", s.stall_seconds);
  report.set(o + ".wait_prefetches", bytes(s.wait_prefetches));
  report.set(o + ".wait_copy_s", s.wait_copy_seconds);
  report.set(o + ".peak_device_bytes", bytes(s.peak_device_bytes));
  report.set(o + ".peak_host_bytes", bytes(s.peak_host_bytes));
  report.set(o + ".peak_disk_bytes", bytes(s.peak_disk_bytes));
  report.set(o + ".peak_tensor_bytes", bytes(s.peak_tensor_bytes));
}

} // namespace tessera::runtime
