// The eviction policies against hand-made uses: LRU takes the chunk touched longest ago;
// farthest-next-use takes the one needed last (never first), and is LRU before the trace exists.
#include "eviction.hpp"

#include <gtest/gtest.h>
#include <map>

namespace tessera {
namespace {

/// Uses given by hand: chunk → last touch, chunk → next use.
class GivenUses final : public ChunkUses {
public:
  std::map<std::size_t, std::uint64_t> last, next;
  bool known = true;
  std::uint64_t last_use(std::size_t c) const override { return last.at(c); }
  bool trace_known() const override { return known; }
  std::uint64_t next_use(std::size_t c) const override { return next.at(c); }
};

/// The chunk of 0..2 the policy evicts: the highest score.
std::size_t victim(const Eviction& policy, const GivenUses& uses) {
  std::size_t best = 0;
  for (std::size_t c = 1; c < 3; ++c) {
    if (policy.score(c, uses) > policy.score(best, uses)) best = c;
  }
  return best;
}

TEST(Eviction, LruTakesTheChunkTouchedLongestAgo) {
  GivenUses uses;
  uses.last = {{0, 7}, {1, 3}, {2, 9}};
  uses.next = {{0, 100}, {1, 1}, {2, 50}};

  EXPECT_EQ(victim(*make_eviction(EvictionPolicy::Lru), uses), 1u);
}

TEST(Eviction, FarthestNextUseTakesTheChunkNeededLastAndIsLruBeforeTheTrace) {
  GivenUses uses;
  uses.last = {{0, 7}, {1, 3}, {2, 9}};
  uses.next = {{0, 100}, {1, 1}, {2, 50}};
  const auto policy = make_eviction(EvictionPolicy::FarthestNextUse);

  EXPECT_EQ(victim(*policy, uses), 0u);
  uses.next[2] = kNeverUsed;
  EXPECT_EQ(victim(*policy, uses), 2u); // never needed again: the first to go
  uses.known = false;
  EXPECT_EQ(victim(*policy, uses), 1u); // no trace yet: least recently used
}

} // namespace
} // namespace tessera
