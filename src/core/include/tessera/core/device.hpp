// Backend: where tensors live and kernels run (Ginkgo's executor): CPU cores or one CUDA device.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace tessera {

/// What a backend runs on: host CPU cores or one CUDA GPU.
enum class DeviceKind { Cpu, Cuda };

/// "cpu" or "cuda".
std::string to_string(DeviceKind kind);

/// Owns what kernels need to run on one device: threads (CPU) or stream and library handles
/// (CUDA), and the allocator for tensor memory. Tensors keep a shared pointer to theirs.
class Backend {
public:
  virtual ~Backend() = default;

  /// Cpu or Cuda; says whether this backend's memory is host memory.
  virtual DeviceKind kind() const noexcept = 0;
  /// Device ordinal (CUDA) or 0 (CPU).
  virtual int device_id() const noexcept = 0;
  /// Threads the CPU kernels use (CPU), or 1.
  virtual int num_threads() const noexcept = 0;
  /// Uninitialized memory of `bytes` bytes, aligned for vector loads. Throws on failure.
  virtual void* allocate(std::size_t bytes) const = 0;
  /// Frees memory from allocate(); never throws.
  virtual void deallocate(void* ptr, std::size_t bytes) const noexcept = 0;

  /// Copies `bytes` from host memory into this backend's memory (returns when `src` may be
  /// reused), from this backend's memory to host memory (returns when `dst` holds the data), or
  /// within this backend's memory (queued in order with the kernels).
  virtual void copy_from_host(void* dst, const void* src, std::size_t bytes) const = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) const = 0;
  virtual void copy_within(void* dst, const void* src, std::size_t bytes) const = 0;
  /// Sets `bytes` of this backend's memory to zero (queued in order with the kernels).
  virtual void zero_bytes(void* dst, std::size_t bytes) const = 0;
  /// Returns when all work queued on this backend has finished (CUDA: its stream).
  virtual void synchronize() const = 0;
  /// The native stream work is queued on (a cudaStream_t for CUDA), or nullptr (CPU); for
  /// libraries that must join it, such as NCCL.
  virtual void* native_stream() const noexcept { return nullptr; }
  /// A short description for logs and reports ("cpu (2 threads)").
  virtual std::string describe() const = 0;
};

/// How tensors and callers hold a backend: shared, so it outlives every tensor allocated on it.
using BackendPtr = std::shared_ptr<const Backend>;

/// The kernel set the BLAS library chose for this CPU (OpenBLAS's core name, e.g. "SkylakeX").
std::string blas_core_name();

/// A warning when the BLAS runs generic kernels on a CPU that has faster ones (OpenBLAS builds
/// that do not know a new CPU model fall back to SSE3 "Prescott" kernels, several times slower);
/// empty otherwise. The fix is an environment variable set before the process starts.
std::string blas_performance_warning();

/// The most threads a CPU backend runs: 4 per core of the machine.
int max_cpu_threads();

/// The host backend. num_threads = 0 keeps OpenMP's default (OMP_NUM_THREADS or all cores);
/// a positive value sets the OpenMP thread count for the process. Throws InvalidArgument naming
/// --threads or OMP_NUM_THREADS and the range [0, max_cpu_threads()] for a count outside it
/// (given, or OpenMP's default).
BackendPtr make_cpu_backend(int num_threads = 0);

/// Copies `bytes` from memory of backend `from` to memory of backend `to` (any pair of host and
/// devices). Returns when `dst` holds the data.
void copy_bytes(const Backend& to, void* dst, const Backend& from, const void* src,
                std::size_t bytes);

} // namespace tessera
