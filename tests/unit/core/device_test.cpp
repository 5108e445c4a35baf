// The CPU backend's thread count: bounded (a few per core) whether asked for directly or through
// OpenMP's default, with the flag or variable and the range named.
#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <string>

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(CpuBackend, ThreadCountFarAboveTheCoresIsRefusedNamingTheFlagAndRange) {
  const std::string range = "[0, " + std::to_string(max_cpu_threads()) + "]";

  EXPECT_THAT([] { make_cpu_backend(100000); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("--threads"), HasSubstr(range), HasSubstr("got 100000"))));
}

TEST(CpuBackend, OpenMPDefaultFarAboveTheCoresIsRefusedNamingTheVariable) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(100000); // what OMP_NUM_THREADS=100000 sets at start

  EXPECT_THAT([] { make_cpu_backend(0); }, ::testing::ThrowsMessage<InvalidArgument>(AllOf(
                                               HasSubstr("OMP_NUM_THREADS"), HasSubstr("100000"))));
  omp_set_num_threads(before);
}

TEST(CpuBackend, ThreadCountsUpToTheCapAreAccepted) {
  const int before = omp_get_max_threads();

  EXPECT_EQ(make_cpu_backend(max_cpu_threads())->num_threads(), max_cpu_threads());
  EXPECT_EQ(make_cpu_backend(1)->num_threads(), 1);
  omp_set_num_threads(before);
}

} // namespace
} // namespace tessera
