// The CUDA backend's engine services against the host's: copies through pinned memory on the copy
// stream, ordered after the kernels queued before them; an address space whose slots keep their
// bytes across unmap and map elsewhere; SpMM plans that live exactly as long as their matrix.
// Skipped (with the reason) where there is no GPU.
#include "cuda/cuda_test_util.hpp"
#include "tessera/kernels/backend_kernels.hpp"
#include "unit/kernels/kernel_test_util.hpp"

#include <algorithm>
#include <cstddef>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <tessera/tessera.hpp>
#include <vector>

namespace tessera::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

/// Bytes 1, 2, ... 251, 1, ... (never 0, so zeroed bytes show).
std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> bytes(n);
  for (std::size_t i = 0; i < n; ++i)
    bytes[i] = static_cast<std::byte>(1 + i % 251);
  return bytes;
}

using CudaBackendServices = CudaTest;

TEST_F(CudaBackendServices, CopyAsyncThroughPinnedMemoryIsEquivalentToRef) {
  const std::size_t n = (std::size_t{3} << 20) + 17;
  std::vector<std::byte> expected = pattern(n);
  PinnedBuffer host(gpu, n);
  PinnedBuffer back(gpu, n);
  Buffer<std::byte> device(gpu, static_cast<std::int64_t>(n));
  std::copy(expected.begin(), expected.end(), host.data());

  const auto to_device =
      gpu->copy_async(device.data(), host.data(), n, CopyDirection::HostToDevice);
  gpu->wait(Stream::Compute, *to_device);
  gpu->zero_bytes(device.data(), n / 2); // a kernel the copy back must see
  const auto to_host = gpu->copy_async(back.data(), device.data(), n, CopyDirection::DeviceToHost);
  to_host->synchronize();

  std::fill_n(expected.begin(), n / 2, std::byte{0});
  EXPECT_TRUE(to_host->ready());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), back.data()));
}

TEST_F(CudaBackendServices, RecordedEventsOrderTheCopyStreamAfterCompute) {
  const std::size_t n = std::size_t{1} << 20;
  const std::vector<std::byte> expected = pattern(n);
  PinnedBuffer host(gpu, n);
  Buffer<std::byte> a(gpu, static_cast<std::int64_t>(n));
  Buffer<std::byte> b(gpu, static_cast<std::int64_t>(n));
  gpu->copy_from_host(a.data(), expected.data(), n);

  gpu->copy_within(b.data(), a.data(), n); // on the compute stream
  gpu->wait(Stream::Copy, *gpu->record(Stream::Compute));
  gpu->copy_async(host.data(), b.data(), n, CopyDirection::DeviceToHost)->synchronize();

  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), host.data()));
}

TEST_F(CudaBackendServices, AddressSpaceSlotKeepsItsBytesWhenMappedElsewhere) {
  const std::size_t g = gpu->address_granularity();
  const auto space = gpu->reserve_address_space(4 * g, g, 2);
  const std::vector<std::byte> expected = pattern(g);
  std::vector<std::byte> other(g, std::byte{7});
  std::vector<std::byte> got(g);

  space->map(0, 1);
  space->map(g, 0);
  gpu->copy_from_host(space->base(), expected.data(), g);
  gpu->copy_from_host(space->base() + g, other.data(), g);
  gpu->synchronize();
  space->unmap(0);
  space->map(3 * g, 1);
  gpu->copy_to_host(got.data(), space->base() + 3 * g, g);

  EXPECT_EQ(space->size(), 4 * g);
  EXPECT_EQ(got, expected);
}

TEST_F(CudaBackendServices, AddressSpaceRefusesASlotSizeOffTheGranularity) {
  const std::size_t g = gpu->address_granularity();

  EXPECT_THAT([&] { gpu->reserve_address_space(4 * g, g + 4096, 1); },
              ::testing::ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("slot size"),
                                                              HasSubstr(std::to_string(g + 4096)),
                                                              HasSubstr(std::to_string(g)))));
}

TEST_F(CudaBackendServices, SpmmPlanSurvivesTheFreeOfAnotherMatrixAndDiesWithItsOwn) {
  const auto a = random_csr<float>(cpu, 301, 77, 0.05, 1, 7);
  const auto x = random_dense<float>(cpu, 77, 33, 2);
  Dense ref(cpu, 301, 33);
  ops::spmm(*cpu, a.view(), x.cview(), ref.view());
  std::optional<Csr> a_gpu(up(a));
  std::optional<Csr> other(up(random_csr<float>(cpu, 301, 77, 0.05, 3)));
  const Dense x_gpu = up(x);
  Dense y_gpu(gpu, 301, 33);

  ops::spmm(*gpu, a_gpu->view(), x_gpu.cview(), y_gpu.view());
  ops::spmm(*gpu, other->view(), x_gpu.cview(), y_gpu.view());
  const std::size_t both = kernels::cuda::spmm_plan_count(*gpu);
  other.reset();
  const std::size_t after_free = kernels::cuda::spmm_plan_count(*gpu);
  ops::spmm(*gpu, a_gpu->view(), x_gpu.cview(), y_gpu.view());
  const std::size_t after_reuse = kernels::cuda::spmm_plan_count(*gpu);
  const Dense y = down(y_gpu);
  a_gpu.reset();

  EXPECT_EQ(both, 2u);
  EXPECT_EQ(after_free, 1u);
  EXPECT_EQ(after_reuse, 1u);
  EXPECT_EQ(kernels::cuda::spmm_plan_count(*gpu), 0u);
  expect_all_near(as_doubles(ref.data(), ref.size()), y.data(), y.size());
}

TEST_F(CudaBackendServices, SpmmOfRowSlicesKeepsOnePlanPerSliceAndIsEquivalentToRef) {
  const auto a = random_csr<float>(cpu, 200, 50, 0.1, 4, 5);
  const auto x = random_dense<float>(cpu, 50, 16, 5);
  Dense ref(cpu, 200, 16);
  ops::spmm(*cpu, a.view(), x.cview(), ref.view());
  const Csr a_gpu = up(a);
  const Dense x_gpu = up(x);
  Dense y_gpu(gpu, 200, 16);

  for (int repeat = 0; repeat < 2; ++repeat) {
    ops::spmm(*gpu, a_gpu.view().row_slice(0, 120), x_gpu.cview(), y_gpu.view().slice_rows(0, 120));
    ops::spmm(*gpu, a_gpu.view().row_slice(120, 200), x_gpu.cview(),
              y_gpu.view().slice_rows(120, 200));
  }

  EXPECT_EQ(kernels::cuda::spmm_plan_count(*gpu), 2u);
  const Dense y = down(y_gpu);
  expect_all_near(as_doubles(ref.data(), ref.size()), y.data(), y.size());
}

} // namespace
} // namespace tessera::testing
