// The distributed path's refusals on one process: rows PT-Scotch would crash on, and PT-Scotch
// failing without saying so (its ParMETIS API returns METIS_OK after some errors it prints).
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
  options.method = Method::ParMetis;
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

TEST(ParmetisPart, AVertexLeftWithoutAPartIsAFailureThoughPtScotchSaysOk) {
  detail::ensure_mpi();
  detail::ParmetisGraph graph;
  graph.vtxdist = {0, 4};
  graph.xadj = {0, 1, 3, 5, 6};
  graph.adjncy = {1, 0, 2, 1, 3, 2};
  std::vector<std::int32_t> owner;
  EXPECT_EQ(detail::parmetis_part(graph, parmetis(2), MPI_COMM_SELF, owner), 1); // METIS_OK
  // Zero parts: PT-Scotch prints "archCmpltwArchBuild: invalid parameters", returns METIS_OK
  // and leaves every part unset.
  EXPECT_NE(detail::parmetis_part(graph, parmetis(0), MPI_COMM_SELF, owner), 1);
}

} // namespace
} // namespace tessera::partition
