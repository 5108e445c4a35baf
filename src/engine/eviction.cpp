// The eviction policies: LRU and farthest next use.
#include "eviction.hpp"

namespace tessera {

std::uint64_t LruEviction::score(std::size_t c, const ChunkUses& uses) const {
  return kNeverUsed - uses.last_use(c);
}

std::uint64_t FarthestNextUseEviction::score(std::size_t c, const ChunkUses& uses) const {
  return uses.trace_known() ? uses.next_use(c) : before_trace_.score(c, uses);
}

std::unique_ptr<Eviction> make_eviction(EvictionPolicy policy) {
  switch (policy) {
  case EvictionPolicy::Lru:
    return std::make_unique<LruEviction>();
  case EvictionPolicy::FarthestNextUse:
    return std::make_unique<FarthestNextUseEviction>();
  }
  return std::make_unique<FarthestNextUseEviction>();
}

} // namespace tessera
