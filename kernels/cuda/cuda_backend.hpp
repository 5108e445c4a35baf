// The CUDA backend: one device, one stream, cuBLAS and cuSPARSE handles bound to that stream,
// stream-ordered allocation from CUDA's memory pool, and the caches kernels reuse every epoch
// (SpMM plans, scratch buffers). Private to kernels/cuda.
#pragma once

#include "tessera/core/device.hpp"

#include <cstddef>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace tessera::kernels::cuda {

/// What an SpMM plan is made for: one sparse matrix (by its arrays and shape), a dense width,
/// and whether it multiplies by the matrix or its transpose.
struct SpmmPlanKey {
  const void* row_ptr = nullptr;
  const void* col = nullptr;
  const void* val = nullptr;
  std::int64_t rows = 0, cols = 0, nnz = 0, width = 0;
  bool transpose = false;
  bool operator==(const SpmmPlanKey&) const = default;
};

struct SpmmPlanKeyHash {
  std::size_t operator()(const SpmmPlanKey& k) const noexcept {
    std::size_t h = std::hash<const void*>()(k.row_ptr);
    for (const std::int64_t v : {k.rows, k.cols, k.nnz, k.width})
      h = h * 1000003u ^ std::hash<std::int64_t>()(v);
    return h ^ (k.transpose ? 0x9E3779B9u : 0u);
  }
};

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind kind() const noexcept override { return DeviceKind::Cuda; }
  int device_id() const noexcept override { return device_; }
  int num_threads() const noexcept override { return 1; }
  void* allocate(std::size_t bytes) const override;
  void deallocate(void* ptr, std::size_t bytes) const noexcept override;
  void copy_from_host(void* dst, const void* src, std::size_t bytes) const override;
  void copy_to_host(void* dst, const void* src, std::size_t bytes) const override;
  void copy_within(void* dst, const void* src, std::size_t bytes) const override;
  void zero_bytes(void* dst, std::size_t bytes) const override;
  void synchronize() const override;
  void* native_stream() const noexcept override { return stream_; }
  std::string describe() const override;

  cudaStream_t stream() const noexcept { return stream_; }
  cublasHandle_t cublas_handle() const noexcept { return cublas_; }
  cusparseHandle_t cusparse_handle() const noexcept { return cusparse_; }

  /// The plan for `key`, made by `make` on first use and kept until the matrix's row pointer
  /// memory is freed through this backend. P is any type; plans of one key share one type.
  template <typename P, typename Make> P& plan(const SpmmPlanKey& key, Make make) const {
    const std::lock_guard lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, std::shared_ptr<void>(make())).first;
    return *static_cast<P*>(it->second.get());
  }

  /// At least `bytes` of device scratch for one kernel family (`slot`), reused across calls;
  /// valid until the next call with the same slot.
  void* scratch(int slot, std::size_t bytes) const;
  /// A device vector of at least `n` ones (bias gradients as a matrix-vector product).
  const float* ones_float(std::int64_t n) const;
  const double* ones_double(std::int64_t n) const;

private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cusparseHandle_t cusparse_ = nullptr;
  mutable std::mutex mutex_;
  mutable std::unordered_map<SpmmPlanKey, std::shared_ptr<void>, SpmmPlanKeyHash> plans_;
  struct Scratch {
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  mutable std::unordered_map<int, Scratch> scratch_;
  mutable std::int64_t ones_float_count_ = 0, ones_double_count_ = 0;
};

/// The CUDA backend behind `backend` (ops dispatch here only for DeviceKind::Cuda).
inline const CudaBackend& as_cuda(const Backend& backend) {
  return static_cast<const CudaBackend&>(backend);
}

/// Scratch slots, one per user, so two kernels never share a buffer while both are live.
enum ScratchSlot : int { kLossScratch = 1, kReduceScratch, kOnesFloat, kOnesDouble };

} // namespace tessera::kernels::cuda
