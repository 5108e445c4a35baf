// main() of the MPI tests: every rank runs every test; rank 0 prints the usual output, the
// others only their failures, and the job fails when any rank does.
#include "mpi/mpi_test_main.hpp"

#include <cstdio>
#include <gtest/gtest.h>
#include <mpi.h>

namespace tessera::testing {

std::shared_ptr<comm::Communicator> world() {
  static const std::shared_ptr<comm::Communicator> communicator = comm::make_mpi_communicator();
  return communicator;
}

} // namespace tessera::testing

namespace {

/// Prints a failed assertion of a rank other than 0, prefixed with the rank.
class RankFailurePrinter final : public ::testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name(), result.line_number(),
                 result.summary());
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char** argv) {
  const tessera::comm::MpiEnvironment mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = tessera::testing::world()->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}
