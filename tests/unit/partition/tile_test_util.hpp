// Helpers of the tile tests: two tiles compared field by field.
#pragma once

#include "tessera/partition/local_graph.hpp"
#include "unit/datasets/dataset_test_util.hpp"

#include <gtest/gtest.h>

namespace tessera::partition::tests {

inline void expect_same_tile(const LocalGraph& a, const LocalGraph& b) {
  EXPECT_EQ(a.part, b.part);
  EXPECT_EQ(a.num_parts, b.num_parts);
  EXPECT_EQ(a.num_global_nodes, b.num_global_nodes);
  EXPECT_EQ(a.owned_ids, b.owned_ids);
  EXPECT_EQ(a.ghost_ids, b.ghost_ids);
  EXPECT_EQ(a.ghost_owner, b.ghost_owner);
  EXPECT_EQ(a.degree, b.degree);
  datasets::tests::expect_same_graph_fields(a, b);
}

} // namespace tessera::partition::tests
