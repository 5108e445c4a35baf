// The CUDA backend and the checks every CUDA entry point uses.
#include "cuda_backend.hpp"

#include "tessera/kernels/backend_kernels.hpp"
#include "cuda_check.hpp"
#include "cuda_libraries.hpp"
#include "tessera/core/error.hpp"

#include <cstdint>
#include <fmt/core.h>
#include <limits>
#include <vector>

namespace tessera::kernels::cuda {

namespace {

int current_device() noexcept {
  int device = -1;
  return cudaGetDevice(&device) == cudaSuccess ? device : -1;
}

} // namespace

void check(cudaError_t status, const char* call, std::source_location where) {
  if (status == cudaSuccess) return;
  throw CudaError(fmt::format("{} failed on device {}: {} ({})", call, current_device(),
                              cudaGetErrorString(status), cudaGetErrorName(status)),
                  where);
}

void check(cublasStatus_t status, const char* call, std::source_location where) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CublasError(fmt::format("{} failed on device {}: {} ({})", call, current_device(),
                                cublas().status_string(status), cublas().status_name(status)),
                    where);
}

void check(cusparseStatus_t status, const char* call, std::source_location where) {
  if (status == CUSPARSE_STATUS_SUCCESS) return;
  throw CusparseError(fmt::format("{} failed on device {}: {} ({})", call, current_device(),
                                  cusparse().error_string(status), cusparse().error_name(status)),
                      where);
}

void check_launch(const char* kernel, std::source_location where) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw CudaError(fmt::format("launching kernel {} failed on device {}: {}", kernel,
                              current_device(), cudaGetErrorString(status)),
                  where);
}

CudaBackend::CudaBackend(int device) : device_(device) {
  TESSERA_CUDA_CHECK(cudaSetDevice(device_));
  TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  check(cublas().create(&cublas_), "cublasCreate");
  check(cublas().set_stream(cublas_, stream_), "cublasSetStream");
  check(cusparse().create(&cusparse_), "cusparseCreate");
  check(cusparse().set_stream(cusparse_, stream_), "cusparseSetStream");
  // Freed blocks stay in the pool for the next epoch instead of going back to the driver: a
  // stream-ordered caching allocator.
  cudaMemPool_t pool = nullptr;
  TESSERA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_));
  std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
  TESSERA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  plans_.clear();
  for (auto& [slot, s] : scratch_)
    cudaFree(s.ptr);
  if (cusparse_ != nullptr) cusparse().destroy(cusparse_);
  if (cublas_ != nullptr) cublas().destroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void* CudaBackend::allocate(std::size_t bytes) const {
  void* ptr = nullptr;
  TESSERA_CUDA_CHECK(cudaSetDevice(device_));
  const cudaError_t status = cudaMallocAsync(&ptr, bytes, stream_);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    std::size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw CudaError(fmt::format("out of memory on device {} allocating {} bytes ({} of {} free)",
                                device_, bytes, free, total));
  }
  check(status, "cudaMallocAsync");
  return ptr;
}

void CudaBackend::deallocate(void* ptr, std::size_t bytes) const noexcept {
  {
    // Plans made for a matrix whose row pointers lived here would outlive it.
    const std::lock_guard lock(mutex_);
    const auto* begin = static_cast<const char*>(ptr);
    for (auto it = plans_.begin(); it != plans_.end();) {
      const auto* row_ptr = static_cast<const char*>(it->first.row_ptr);
      it = row_ptr >= begin && row_ptr < begin + bytes ? plans_.erase(it) : std::next(it);
    }
  }
  cudaSetDevice(device_);
  cudaFreeAsync(ptr, stream_);
}

void CudaBackend::copy_from_host(void* dst, const void* src, std::size_t bytes) const {
  if (bytes == 0) return;
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* dst, const void* src, std::size_t bytes) const {
  if (bytes == 0) return;
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_within(void* dst, const void* src, std::size_t bytes) const {
  if (bytes == 0 || dst == src) return;
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::zero_bytes(void* dst, std::size_t bytes) const {
  if (bytes == 0) return;
  TESSERA_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaBackend::synchronize() const {
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::string CudaBackend::describe() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_) != cudaSuccess)
    return fmt::format("cuda:{}", device_);
  return fmt::format("cuda:{} ({}, {:.0f} GiB, sm_{}{})", device_, prop.name,
                     static_cast<double>(prop.totalGlobalMem) / (1 << 30), prop.major, prop.minor);
}

void* CudaBackend::scratch(int slot, std::size_t bytes) const {
  const std::lock_guard lock(mutex_);
  Scratch& s = scratch_[slot];
  if (s.bytes < bytes) {
    // Earlier kernels on the stream may still read the old buffer.
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    TESSERA_CUDA_CHECK(cudaFree(s.ptr));
    s = {};
    TESSERA_CUDA_CHECK(cudaMalloc(&s.ptr, bytes));
    s.bytes = bytes;
  }
  return s.ptr;
}

namespace {

template <typename T>
const T* ones(const CudaBackend& backend, int slot, std::int64_t n, std::int64_t& filled) {
  auto* data = static_cast<T*>(backend.scratch(slot, static_cast<std::size_t>(n) * sizeof(T)));
  if (filled < n) { // the buffer only ever holds ones: fill it from the host when it grows
    const std::vector<T> host(static_cast<std::size_t>(n), T{1});
    backend.copy_from_host(data, host.data(), host.size() * sizeof(T));
    filled = n;
  }
  return data;
}

} // namespace

const float* CudaBackend::ones_float(std::int64_t n) const {
  return ones<float>(*this, kOnesFloat, n, ones_float_count_);
}
const double* CudaBackend::ones_double(std::int64_t n) const {
  return ones<double>(*this, kOnesDouble, n, ones_double_count_);
}

bool compiled() noexcept {
  return true;
}

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky error; no driver or no device means no GPU
    return 0;
  }
  return count;
}

BackendPtr make_backend(int device) {
  const int count = device_count();
  if (device < 0 || device >= count) {
    throw InvalidArgument(fmt::format("no CUDA device {}: this process sees {} device{}", device,
                                      count, count == 1 ? "" : "s"));
  }
  return std::make_shared<CudaBackend>(device);
}

} // namespace tessera::kernels::cuda
