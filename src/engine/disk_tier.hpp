// The chunk engine's disk tier: one file per rank in the offload folder, of chunk-sized slots, that
// holds the chunks the host tier has no room for. Private to the engine (ChunkManager).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

class DiskTier {
public:
  /// A tier in folder `dir` (empty: none; writes are then refused) of `chunk`-byte slots for
  /// rank `rank`. The folder is checked now and created when absent, with its missing parents
  /// (removed again when the tier ends, if still empty); the file is made on the first write and
  /// unlinked at once, so no exit path leaves it behind. After `fail_writes_after` bytes every
  /// write fails as a full disk would (a test's fault injection; default never). Throws IoError
  /// naming the offload folder and what it is.
  DiskTier(std::string dir, int rank, std::size_t chunk,
           std::uint64_t fail_writes_after = UINT64_MAX);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  /// Writes the `chunk` bytes at `bytes` to slot `slot` (a free one is taken when it is -1),
  /// for chunk number `index` (named in errors). Throws InvalidArgument when there is no tier
  /// (`host_budget`, the host memory budget as text, ran out) and IoError naming the file, the
  /// offset and why.
  void write(std::int64_t& slot, std::size_t index, const std::byte* bytes,
             const std::string& host_budget);
  /// Reads slot `slot` into the `chunk` bytes at `bytes`; IoError naming the file otherwise.
  void read(std::int64_t slot, std::size_t index, std::byte* bytes);
  /// Gives slot `slot` back (no-op for -1).
  void release(std::int64_t slot);
  /// Slots the file has held at most: its size in chunks.
  std::int64_t slots() const noexcept { return slots_; }

private:
  void open_file();

  std::string dir_;
  int rank_;
  std::size_t chunk_;
  std::uint64_t fail_writes_after_;
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> made_; // folders this tier created, outermost first
  std::vector<std::int64_t> free_;
  std::int64_t slots_ = 0;
  std::uint64_t written_ = 0;
};

} // namespace tessera
