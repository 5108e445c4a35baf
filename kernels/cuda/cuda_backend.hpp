// The CUDA backend: one device, one stream, cuBLAS and cuSPARSE handles bound to that stream,
// stream-ordered allocation from CUDA's memory pool, and the caches kernels reuse every epoch
// (SpMM plans, scratch buffers). Private to kernels/cuda.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

#include <cstddef>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace tessera::kernels::cuda {

/// What an SpMM plan is made for: rows [first_row, first_row + rows) of the matrix `handle`
/// (CsrView::handle; never reused, so a key never meets another matrix's plan), the column and
/// value arrays the plan's descriptor points at (a view may carry other values, as dropout's
/// does), a dense width, and whether it multiplies by the matrix or its transpose.
struct SpmmPlanKey {
  std::uint64_t handle = 0;
  std::int64_t first_row = 0, rows = 0, cols = 0, width = 0;
  const void* col = nullptr;
  const void* val = nullptr;
  bool transpose = false;
  bool operator==(const SpmmPlanKey&) const = default;
};

struct SpmmPlanKeyHash {
  std::size_t operator()(const SpmmPlanKey& k) const noexcept {
    std::size_t h = std::hash<std::uint64_t>()(k.handle);
    for (const std::int64_t v : {k.first_row, k.rows, k.cols, k.width})
      h = h * 1000003u ^ std::hash<std::int64_t>()(v);
    h = h * 1000003u ^ std::hash<const void*>()(k.val);
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
  void* allocate_pinned(std::size_t bytes) const override;
  void deallocate_pinned(void* ptr, std::size_t bytes) const noexcept override;
  std::shared_ptr<Event> copy_async(void* dst, const void* src, std::size_t bytes,
                                    CopyDirection direction) const override;
  std::shared_ptr<Event> record(Stream stream) const override;
  void wait(Stream stream, const Event& event) const override;
  std::unique_ptr<AddressSpace> reserve_address_space(std::size_t reserve_bytes,
                                                      std::size_t slot_bytes,
                                                      int slots) const override;
  std::size_t address_granularity() const override;
  void* native_stream() const noexcept override { return stream_; }
  std::string describe() const override;

  cudaStream_t stream() const noexcept { return stream_; }
  /// The stream behind `stream` (Compute: stream(); Copy: the copy stream).
  cudaStream_t stream(Stream stream) const noexcept {
    return stream == Stream::Copy ? copy_stream_ : stream_;
  }
  cublasHandle_t cublas_handle() const noexcept { return cublas_; }
  cusparseHandle_t cusparse_handle() const noexcept { return cusparse_; }

  /// The plan for `key` (key.handle != 0), made by `make` (returning a new P*) on first use
  /// and kept until the CsrT with that handle is destroyed or assigned over. P is any type;
  /// plans of one key share one type. The reference stays valid while that matrix lives.
  template <typename P, typename Make> P& plan(const SpmmPlanKey& key, Make make) const {
    const std::lock_guard lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, std::shared_ptr<P>(make())).first;
    return *static_cast<P*>(it->second.get());
  }
  /// Plans cached for now (for tests of their lifetime).
  std::size_t plan_count() const {
    const std::lock_guard lock(mutex_);
    return plans_.size();
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
  cudaStream_t copy_stream_ = nullptr; // Stream::Copy: host <-> device copies beside the kernels
  cublasHandle_t cublas_ = nullptr;
  cusparseHandle_t cusparse_ = nullptr;
  mutable std::mutex mutex_;
  mutable std::unordered_map<SpmmPlanKey, std::shared_ptr<void>, SpmmPlanKeyHash> plans_;
  /// Drops the plans of a matrix when it is released; reset first in the destructor, so no
  /// callback runs while the backend is being taken apart.
  std::unique_ptr<MatrixReleaseSubscription> release_plans_;
  struct Scratch {
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  mutable std::unordered_map<int, Scratch> scratch_;
  mutable std::int64_t ones_float_count_ = 0, ones_double_count_ = 0;
};

/// A cudaEvent (made without timing, the cheap kind) recorded on one of a backend's streams;
/// destroyed with the last reference.
class CudaEvent final : public Event {
public:
  /// Records a new event on `stream` of device `device`. Throws CudaError.
  CudaEvent(int device, cudaStream_t stream);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  bool ready() const override;
  void synchronize() const override;
  cudaEvent_t native() const noexcept { return event_; }

private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

/// The CUDA backend behind `backend` (ops dispatch here only for DeviceKind::Cuda).
inline const CudaBackend& as_cuda(const Backend& backend) {
  return static_cast<const CudaBackend&>(backend.target());
}

/// Scratch slots, one per user, so two kernels never share a buffer while both are live.
enum ScratchSlot : int { kLossScratch = 1, kReduceScratch, kOnesFloat, kOnesDouble };

} // namespace tessera::kernels::cuda
