// The chunk engine's eviction policies: which resident chunk leaves when a slot is needed. One
// interface, one class per policy (--eviction-policy); the mechanism (ChunkManager) asks and
// moves. Private to the engine.
#pragma once

#include "tessera/engine/chunk_manager.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

namespace tessera {

/// "Never again": the next use of a chunk the trace does not touch.
inline constexpr std::uint64_t kNeverUsed = std::numeric_limits<std::uint64_t>::max();

/// What a policy may read of a chunk's uses.
class ChunkUses {
public:
  virtual ~ChunkUses() = default;
  /// The clock (a count of touches) at chunk `c`'s last touch.
  virtual std::uint64_t last_use(std::size_t c) const = 0;
  /// Whether the order of touches of an epoch is known (recorded in the second epoch: the first
  /// allocates, in an order of its own).
  virtual bool trace_known() const = 0;
  /// Where in the trace chunk `c` is next touched (kNeverUsed: never); with trace_known() only.
  virtual std::uint64_t next_use(std::size_t c) const = 0;
};

/// An eviction policy: a score per candidate chunk (one holding data; an empty chunk costs no
/// move and is taken first by the mechanism); the highest score leaves.
class Eviction {
public:
  virtual ~Eviction() = default;
  virtual std::uint64_t score(std::size_t c, const ChunkUses& uses) const = 0;
};

/// Least recently used: the chunk touched longest ago.
class LruEviction final : public Eviction {
public:
  std::uint64_t score(std::size_t c, const ChunkUses& uses) const override;
};

/// Belady's farthest next use over the recorded trace (a chunk never used again first); LRU
/// until an epoch has recorded the trace.
class FarthestNextUseEviction final : public Eviction {
public:
  std::uint64_t score(std::size_t c, const ChunkUses& uses) const override;

private:
  LruEviction before_trace_;
};

/// The policy `policy` names.
std::unique_ptr<Eviction> make_eviction(EvictionPolicy policy);

} // namespace tessera
