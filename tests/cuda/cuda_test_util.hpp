// Pieces of the CUDA tests: skip without a GPU, and moving test data to and from the device.
#pragma once

#include <gtest/gtest.h>
#include <tessera/tessera.hpp>
#include <vector>

/// Skips the current test, saying why, when this process has no usable GPU.
#define TESSERA_REQUIRE_GPU()                                                                      \
  do {                                                                                             \
    if (::tessera::cuda_device_count() == 0) {                                                     \
      GTEST_SKIP() << (::tessera::cuda_compiled()                                                  \
                           ? "no CUDA device visible to this process"                              \
                           : "this build has no CUDA backend (TESSERA_WITH_CUDA=OFF or no nvcc)"); \
    }                                                                                              \
  } while (0)

namespace tessera::testing {

/// A fixture with the host backend and, when a GPU is present, device 0's backend.
class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    TESSERA_REQUIRE_GPU();
    gpu = make_cuda_backend(0);
  }

  template <typename T> DenseT<T> up(const DenseT<T>& x) const { return to_backend(x, gpu); }
  template <typename T> CsrT<T> up(const CsrT<T>& x) const { return to_backend(x, gpu); }
  template <typename T> Buffer<T> up(const std::vector<T>& x) const {
    Buffer<T> out(gpu, static_cast<std::int64_t>(x.size()));
    copy_bytes(*gpu, out.data(), *cpu, x.data(), x.size() * sizeof(T));
    return out;
  }
  template <typename T> DenseT<T> down(const DenseT<T>& x) const { return to_backend(x, cpu); }
  template <typename T> std::vector<T> down(const Buffer<T>& x) const {
    std::vector<T> out(static_cast<std::size_t>(x.size()));
    copy_bytes(*cpu, out.data(), *gpu, x.data(), out.size() * sizeof(T));
    return out;
  }

  BackendPtr cpu = make_cpu_backend();
  BackendPtr gpu;
};

} // namespace tessera::testing
