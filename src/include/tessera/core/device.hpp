// Backend: where tensors live and kernels run (Ginkgo's executor). CPU now; CUDA plugs in here.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace tessera {

enum class DeviceKind { Cpu, Cuda };

std::string to_string(DeviceKind kind);

/// Owns what kernels need to run on one device: threads (CPU) or stream and library handles
/// (CUDA), and the allocator for tensor memory. Tensors keep a shared pointer to theirs.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind kind() const noexcept = 0;
  /// Device ordinal (CUDA) or 0 (CPU).
  virtual int device_id() const noexcept = 0;
  /// Threads the CPU kernels use (CPU), or 1.
  virtual int num_threads() const noexcept = 0;
  /// Uninitialized memory of `bytes` bytes, aligned for vector loads. Throws on failure.
  virtual void* allocate(std::size_t bytes) const = 0;
  /// Frees memory from allocate(); never throws.
  virtual void deallocate(void* ptr, std::size_t bytes) const noexcept = 0;
  /// A short description for logs and reports ("cpu (2 threads)").
  virtual std::string describe() const = 0;
};

using BackendPtr = std::shared_ptr<const Backend>;

/// The kernel set the BLAS library chose for this CPU (OpenBLAS's core name, e.g. "SkylakeX").
std::string blas_core_name();

/// A warning when the BLAS runs generic kernels on a CPU that has faster ones (OpenBLAS builds
/// that do not know a new CPU model fall back to SSE3 "Prescott" kernels, several times slower);
/// empty otherwise. The fix is an environment variable set before the process starts.
std::string blas_performance_warning();

/// The host backend. num_threads = 0 keeps OpenMP's default (OMP_NUM_THREADS or all cores);
/// a positive value sets the OpenMP thread count for the process.
BackendPtr make_cpu_backend(int num_threads = 0);

}  // namespace tessera
