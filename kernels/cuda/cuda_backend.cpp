// The CUDA backend and the checks every CUDA entry point uses.
#include "cuda_backend.hpp"

#include "cuda_address_space.hpp"
#include "cuda_check.hpp"
#include "cuda_libraries.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/backend_kernels.hpp"

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
  TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
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
  // A released matrix's plans go with it: they hold descriptors of its arrays and workspaces
  // of up to 16 bytes per nonzero (transposed plans), and its handle never comes back.
  release_plans_ = std::make_unique<MatrixReleaseSubscription>([this](std::uint64_t handle) {
    const std::lock_guard lock(mutex_);
    std::erase_if(plans_, [handle](const auto& entry) { return entry.first.handle == handle; });
  });
}

CudaBackend::~CudaBackend() {
  release_plans_.reset();
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
  plans_.clear();
  for (auto& [slot, s] : scratch_)
    cudaFree(s.ptr);
  if (cusparse_ != nullptr) cusparse().destroy(cusparse_);
  if (cublas_ != nullptr) cublas().destroy(cublas_);
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
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

void CudaBackend::deallocate(void* ptr, std::size_t) const noexcept {
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
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
}

void* CudaBackend::allocate_pinned(std::size_t bytes) const {
  void* ptr = nullptr;
  TESSERA_CUDA_CHECK(cudaSetDevice(device_));
  const cudaError_t status = cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw CudaError(fmt::format("out of page-locked host memory allocating {} bytes for device {}",
                                bytes, device_));
  }
  check(status, "cudaHostAlloc");
  return ptr;
}

void CudaBackend::deallocate_pinned(void* ptr, std::size_t) const noexcept {
  if (ptr != nullptr) cudaFreeHost(ptr);
}

std::shared_ptr<Event> CudaBackend::copy_async(void* dst, const void* src, std::size_t bytes,
                                               CopyDirection direction) const {
  TESSERA_CUDA_CHECK(cudaSetDevice(device_));
  // The copy waits for the kernels queued so far (it may read what they write, or overwrite
  // what they read), but not for kernels queued after it: that is the overlap.
  const CudaEvent compute_done(device_, stream_);
  TESSERA_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, compute_done.native(), 0));
  if (bytes > 0) {
    const cudaMemcpyKind kind =
        direction == CopyDirection::HostToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, copy_stream_));
  }
  return std::make_shared<CudaEvent>(device_, copy_stream_);
}

std::shared_ptr<Event> CudaBackend::record(Stream stream) const {
  return std::make_shared<CudaEvent>(device_, this->stream(stream));
}

void CudaBackend::wait(Stream stream, const Event& event) const {
  if (const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event)) {
    TESSERA_CUDA_CHECK(cudaStreamWaitEvent(this->stream(stream), cuda_event->native(), 0));
  } else {
    event.synchronize(); // another backend's event: the host waits for it instead
  }
}

std::unique_ptr<AddressSpace> CudaBackend::reserve_address_space(std::size_t reserve_bytes,
                                                                 std::size_t slot_bytes,
                                                                 int slots) const {
  return make_device_address_space(device_, reserve_bytes, slot_bytes, slots);
}

std::size_t CudaBackend::address_granularity() const {
  return device_granularity(device_);
}

CudaEvent::CudaEvent(int device, cudaStream_t stream) : device_(device) {
  TESSERA_CUDA_CHECK(cudaSetDevice(device_));
  TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  const cudaError_t status = cudaEventRecord(event_, stream);
  if (status != cudaSuccess) {
    cudaEventDestroy(event_);
    check(status, "cudaEventRecord");
  }
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

bool CudaEvent::ready() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError(); // not an error: the work is still running
    return false;
  }
  check(status, "cudaEventQuery");
  return true;
}

void CudaEvent::synchronize() const {
  TESSERA_CUDA_CHECK(cudaEventSynchronize(event_));
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

std::size_t spmm_plan_count(const Backend& backend) {
  if (backend.kind() != DeviceKind::Cuda) {
    throw InvalidArgument("spmm_plan_count: expected a CUDA backend, got " + backend.describe());
  }
  return as_cuda(backend).plan_count();
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
