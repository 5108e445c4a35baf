// Backend: where tensors live and kernels run (Ginkgo's executor): CPU cores or one CUDA device.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace tessera {

/// A point in one of a backend's queues of work (CUDA: a cudaEvent on a stream). It completes
/// when the work queued before it has finished.
class Event {
 public:
  virtual ~Event() = default;
  /// Whether the work before the event has finished (never blocks).
  virtual bool ready() const = 0;
  /// Blocks the calling thread until ready(). Throws the backend's error when that work failed.
  virtual void synchronize() const = 0;
};

/// The two queues of a backend: kernels run on Compute; asynchronous copies between host and
/// device memory run on Copy, so a copy overlaps the kernels around it.
enum class Stream { Compute, Copy };

/// Which way an asynchronous copy goes.
enum class CopyDirection { HostToDevice, DeviceToHost };

/// A reserved range of a backend's address space and a pool of physical slots of one size that
/// map in and out of it at fixed offsets: what lets the chunk manager move a chunk out of device
/// memory and back without its address changing. Offsets not mapped have no access (a touch
/// faults rather than reading stale or zero data). Not thread-safe.
class AddressSpace {
 public:
  virtual ~AddressSpace() = default;
  /// The first byte of the reserved range, and its length (a multiple of slot_bytes()).
  virtual std::byte* base() const noexcept = 0;
  virtual std::size_t size() const noexcept = 0;
  /// Bytes per slot and the number of slots (the physical memory is slots() * slot_bytes()).
  virtual std::size_t slot_bytes() const noexcept = 0;
  virtual int slots() const noexcept = 0;
  /// Maps physical slot `slot` at base() + offset (a multiple of slot_bytes(), not mapped now).
  /// The slot keeps the bytes it held when last unmapped. A slot's physical memory may be
  /// obtained when it is first mapped (so an address space may have more slots than memory
  /// that is ever used at once). Throws InvalidArgument for an offset
  /// or slot out of range, or an offset already mapped; the backend's error when mapping fails.
  virtual void map(std::size_t offset, int slot) = 0;
  /// Unmaps whatever slot is mapped at base() + offset (its bytes stay in the slot). Work queued
  /// on the backend that touches the range must have finished.
  virtual void unmap(std::size_t offset) = 0;
};

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
  /// Page-locked host memory (CUDA: cudaHostAlloc), so copies from and to it run asynchronously
  /// on the Copy stream; plain aligned host memory on the CPU backend. Throws on failure.
  virtual void* allocate_pinned(std::size_t bytes) const = 0;
  /// Frees memory from allocate_pinned(); never throws.
  virtual void deallocate_pinned(void* ptr, std::size_t bytes) const noexcept = 0;
  /// Queues a copy of `bytes` on the Copy stream, after the Compute work queued so far (so it
  /// reads what the kernels wrote), between host memory (pinned: allocate_pinned) and this
  /// backend's memory; returns the event of its completion. The buffers must stay alive and
  /// untouched until then. The CPU backend copies before returning and returns a ready event.
  virtual std::shared_ptr<Event> copy_async(void* dst, const void* src, std::size_t bytes,
                                            CopyDirection direction) const = 0;
  /// An event after the work queued so far on `stream`.
  virtual std::shared_ptr<Event> record(Stream stream) const = 0;
  /// Work queued on `stream` from now on runs after `event` (no host wait; a no-op on the CPU).
  virtual void wait(Stream stream, const Event& event) const = 0;
  /// A new reserved range of `reserve_bytes` (rounded up to whole slots) with `slots` physical
  /// slots of `slot_bytes` each (a multiple of address_granularity()). The CPU backend's slots
  /// are a memory file mapped with mmap; CUDA's are cuMemCreate allocations mapped with cuMemMap.
  /// Throws InvalidArgument for a slot size that is not a multiple of the granularity, and the
  /// backend's error when the memory cannot be had.
  virtual std::unique_ptr<AddressSpace> reserve_address_space(std::size_t reserve_bytes,
                                                              std::size_t slot_bytes,
                                                              int slots) const = 0;
  /// The unit slot sizes must be a multiple of (the page size on the CPU; CUDA's allocation
  /// granularity, 2 MiB on current GPUs).
  virtual std::size_t address_granularity() const = 0;

  /// The backend that runs kernels: this one, or the one a wrapper (an allocator that places
  /// tensors elsewhere and forwards everything else) wraps. Kernels downcast this.
  virtual const Backend& target() const noexcept { return *this; }

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

/// The OPENBLAS_CORETYPE that gives this CPU fast kernels when OpenBLAS chose its generic ones:
/// OpenBLAS builds that do not know a new CPU model fall back to their SSE3 "Prescott" kernels,
/// several times slower. With `current` the core OpenBLAS runs, `set` the OPENBLAS_CORETYPE in
/// the environment (nullptr or empty: none) and the CPU's features: "SkylakeX" (AVX-512) or
/// "Haswell" (AVX2) when `current` is "Prescott" and the user set nothing; empty otherwise (a
/// value the user set is never overridden).
std::string fast_blas_core(const std::string& current, const char* set, bool avx2, bool avx512f);
/// fast_blas_core for this process: its OpenBLAS, its environment and its CPU.
std::string fast_blas_core();

/// A warning when the BLAS runs generic kernels on a CPU that has faster ones, saying what to
/// set (or, when OPENBLAS_CORETYPE is set, that its value chose them); empty otherwise. The
/// programs re-execute themselves with the fast kernels (runtime::reexec_with_fast_blas), so it
/// is seen only where that could not be done.
std::string blas_performance_warning();

/// The most threads a CPU backend runs: 4 per core of the machine.
int max_cpu_threads();

/// The host backend. num_threads = 0 keeps OpenMP's default (OMP_NUM_THREADS or all cores);
/// a positive value sets the OpenMP thread count for the process. Throws InvalidArgument naming
/// the thread count (or OMP_NUM_THREADS) and the range [0, max_cpu_threads()] for a count outside
/// it (given, or OpenMP's default).
BackendPtr make_cpu_backend(int num_threads = 0);

/// Copies `bytes` from memory of backend `from` to memory of backend `to` (any pair of host and
/// devices). Returns when `dst` holds the data.
void copy_bytes(const Backend& to, void* dst, const Backend& from, const void* src,
                std::size_t bytes);

} // namespace tessera
