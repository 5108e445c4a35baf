// The CPU backend: its thread count is bounded (a few per core) whether asked for directly or
// through OpenMP's default, with the flag or variable and the range named; its asynchronous
// copies, events and address spaces behave like a GPU's that finished at once.
#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(FastBlasCore, NamesTheFastKernelsOnlyWhereOpenBlasFellBackAndTheUserSetNothing) {
  EXPECT_EQ(fast_blas_core("Prescott", nullptr, true, false), "Haswell");
  EXPECT_EQ(fast_blas_core("Prescott", "", true, true), "SkylakeX");
  EXPECT_EQ(fast_blas_core("Prescott", nullptr, false, false), "");  // nothing faster to run
  EXPECT_EQ(fast_blas_core("Zen", nullptr, true, false), "");        // OpenBLAS knows the CPU
  EXPECT_EQ(fast_blas_core("Prescott", "Prescott", true, true), ""); // the user's choice stays
  EXPECT_EQ(fast_blas_core("Prescott", "Haswell", true, false), "");
}

TEST(CpuBackend, ThreadCountFarAboveTheCoresIsRefusedNamingTheFlagAndRange) {
  const std::string range = "[0, " + std::to_string(max_cpu_threads()) + "]";

  EXPECT_THAT([] { make_cpu_backend(100000); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("thread count"), HasSubstr(range), HasSubstr("got 100000"))));
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

namespace tessera {
namespace {

/// Bytes 0, 1, 2, ... (mod 251, so no period divides a power of two).
std::vector<unsigned char> counting_bytes(std::size_t n) {
  std::vector<unsigned char> bytes(n);
  for (std::size_t i = 0; i < n; ++i)
    bytes[i] = static_cast<unsigned char>(i % 251);
  return bytes;
}

TEST(CpuBackend, CopyAsyncRoundTripsThroughPinnedMemoryWithReadyEvents) {
  const BackendPtr cpu = make_cpu_backend();
  const std::size_t n = 3 * 4096 + 17;
  const std::vector<unsigned char> expected = counting_bytes(n);
  auto* pinned = static_cast<unsigned char*>(cpu->allocate_pinned(n));
  auto* device = static_cast<unsigned char*>(cpu->allocate(n));
  std::copy(expected.begin(), expected.end(), pinned);

  const auto to_device = cpu->copy_async(device, pinned, n, CopyDirection::HostToDevice);
  std::fill(pinned, pinned + n, 0);
  const auto to_host = cpu->copy_async(pinned, device, n, CopyDirection::DeviceToHost);

  EXPECT_TRUE(to_device->ready());
  EXPECT_TRUE(to_host->ready());
  to_host->synchronize();
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), pinned));
  cpu->deallocate(device, n);
  cpu->deallocate_pinned(pinned, n);
}

TEST(CpuBackend, RecordedEventsAreReadyAndWaitingOnThemReturns) {
  const BackendPtr cpu = make_cpu_backend();

  const auto compute = cpu->record(Stream::Compute);
  const auto copy = cpu->record(Stream::Copy);
  cpu->wait(Stream::Copy, *compute);
  cpu->wait(Stream::Compute, *copy);

  EXPECT_TRUE(compute->ready());
  EXPECT_TRUE(copy->ready());
}

TEST(CpuBackend, AddressGranularityIsThePageSizeAndSlotsMustBeMultiplesOfIt) {
  const BackendPtr cpu = make_cpu_backend();
  const std::size_t page = cpu->address_granularity();

  EXPECT_EQ(page, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_THAT([&] { cpu->reserve_address_space(4 * page, page + 1, 1); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("slot size"), HasSubstr(std::to_string(page + 1)))));
}

TEST(CpuBackend, AddressSpaceSlotKeepsItsBytesWhenMappedElsewhere) {
  const BackendPtr cpu = make_cpu_backend();
  const std::size_t page = cpu->address_granularity();
  const auto space = cpu->reserve_address_space(4 * page, page, 2);
  const std::vector<unsigned char> expected = counting_bytes(page);

  space->map(0, 1);
  std::copy(expected.begin(), expected.end(), reinterpret_cast<unsigned char*>(space->base()));
  space->unmap(0);
  space->map(2 * page, 1);

  const auto* moved = reinterpret_cast<const unsigned char*>(space->base() + 2 * page);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), moved));
  // A slot's pages are in one place at a time: mapping it at a second offset is refused.
  EXPECT_THAT([&] { space->map(0, 1); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("already mapped")));
  space->unmap(2 * page);
  space->map(3 * page, 1);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(),
                         reinterpret_cast<const unsigned char*>(space->base() + 3 * page)));
}

} // namespace
} // namespace tessera
