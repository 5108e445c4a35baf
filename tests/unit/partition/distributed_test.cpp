// The distributed path's refusals on one process: rows PT-Scotch would crash on, and PT-Scotch's
// failures named by the call that failed.
#include "methods.hpp"
#include "mpi_scope.hpp"
#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/row_block.hpp"
#include "tessera/partition/distributed.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <vector>

namespace tessera::partition {
namespace {

using ::testing::HasSubstr;

/// A 4-vertex path 0-1-2-3, all of it on this one rank.
datasets::RowBlock path_block() {
  datasets::RowBlock block;
  block.name = "path";
  block.num_nodes = 4;
  block.rows = {0, 4};
  block.row_ptr = {0, 1, 3, 5, 6};
  block.col = {1, 0, 2, 1, 3, 2};
  return block;
}

Options parmetis(int parts) {
  Options options;
  options.num_parts = parts;
  options.method = Method::PtScotch;
  return options;
}

TEST(PartitionRows, OneRankOwnsEveryRow) {
  const auto comm = comm::make_self_communicator();
  EXPECT_EQ(partition_rows(path_block(), parmetis(1), *comm), std::vector<std::int32_t>(4, 0));
}

TEST(PartitionRows, RefusesANeighbourOutsideTheGraphBeforePtScotchSeesIt) {
  const auto comm = comm::make_self_communicator();
  datasets::RowBlock block = path_block();
  block.col.back() = 9;
  try {
    partition_rows(block, parmetis(1), *comm);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("row 3 names neighbour 9, outside [0, 4)"));
  }
  block = path_block();
  block.row_ptr.pop_back();
  EXPECT_THROW(partition_rows(block, parmetis(1), *comm), InvalidArgument);
}

TEST(PartitionRows, RefusesAPartCountOtherThanTheRanks) {
  const auto comm = comm::make_self_communicator();
  try {
    partition_rows(path_block(), parmetis(2), *comm);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("one part per rank: 2 parts asked of 1 ranks"));
  }
}

detail::DistGraph path_graph() {
  detail::DistGraph graph;
  graph.vtxdist = {0, 4};
  graph.xadj = {0, 1, 3, 5, 6};
  graph.adjncy = {1, 0, 2, 1, 3, 2};
  return graph;
}

TEST(ScotchPart, CutsAPathInTwoHalves) {
  detail::ensure_mpi();
  detail::DistGraph graph = path_graph();
  std::vector<std::int32_t> owner;
  ASSERT_EQ(detail::scotch_part(graph, parmetis(2), MPI_COMM_SELF, owner),
            detail::ScotchStatus::Ok);
  ASSERT_EQ(owner.size(), 4u);
  EXPECT_EQ(owner[0], owner[1]);
  EXPECT_EQ(owner[2], owner[3]);
  EXPECT_NE(owner[0], owner[2]);
}

TEST(ScotchPart, NamesTheCallThatFailed) {
  detail::ensure_mpi();
  std::vector<std::int32_t> owner;
  // Zero parts: Scotch prints "archCmpltwArchBuild: invalid parameters" and refuses the target.
  detail::DistGraph graph = path_graph();
  const auto status = detail::scotch_part(graph, parmetis(0), MPI_COMM_SELF, owner);
  EXPECT_EQ(status, detail::ScotchStatus::Architecture);
  EXPECT_STREQ(detail::scotch_call(status), "SCOTCH_archCmpltw");
}

} // namespace
} // namespace tessera::partition
