// The CPU backend: OpenMP threads and aligned host memory (huge pages for large buffers).
#include "tessera/core/device.hpp"

#include "address_space.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <new>
#include <omp.h>
#include <sys/mman.h>
#include <thread>
#include <vector>

namespace tessera {

std::string to_string(DeviceKind kind) {
  switch (kind) {
  case DeviceKind::Cpu:
    return "cpu";
  case DeviceKind::Cuda:
    return "cuda";
  }
  return "unknown";
}

std::string blas_core_name() {
  return openblas_get_corename();
}

std::string fast_blas_core(const std::string& current, const char* set, bool avx2, bool avx512f) {
  if (current != "Prescott" || (set != nullptr && *set != '\0')) return {};
  return avx512f ? "SkylakeX" : avx2 ? "Haswell" : "";
}

std::string fast_blas_core() {
  return fast_blas_core(blas_core_name(), std::getenv("OPENBLAS_CORETYPE"),
                        __builtin_cpu_supports("avx2") != 0,
                        __builtin_cpu_supports("avx512f") != 0);
}

std::string blas_performance_warning() {
  const std::string current = blas_core_name();
  const bool avx2 = __builtin_cpu_supports("avx2") != 0;
  const bool avx512f = __builtin_cpu_supports("avx512f") != 0;
  const std::string core = fast_blas_core(current, nullptr, avx2, avx512f);
  if (core.empty()) return {};
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  if (set != nullptr && *set != '\0') {
    return "OPENBLAS_CORETYPE=" + std::string(set) + " runs OpenBLAS's generic " + current +
           " kernels on this CPU; GEMM is several times faster with OPENBLAS_CORETYPE=" + core +
           " (or with it unset)";
  }
  return "OpenBLAS does not recognise this CPU and runs its generic " + current +
         " kernels; GEMM is several times faster with OPENBLAS_CORETYPE=" + core +
         " set before starting";
}

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
/// Threads per available core a CPU backend may run: enough for hyper-threads and
/// oversubscribed tests, far below what exhausts memory for thread stacks.
constexpr int kThreadsPerCore = 4;

/// memcpy over the backend's threads for a large copy: one core copies at a fraction of the
/// memory bandwidth (5.9 GB/s here for 64 MiB, 14 GB/s on two), and the chunk engine's moves
/// are 64 MiB each. Small copies, and copies made inside a parallel region, stay one memcpy.
void copy_bytes_parallel(void* dst, const void* src, std::size_t bytes) {
  constexpr std::size_t kParallelFrom = std::size_t{1} << 20, kAlign = 64;
  if (bytes < kParallelFrom || omp_in_parallel() || omp_get_max_threads() == 1) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
#pragma omp parallel
  {
    const auto parts = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t share = (bytes / parts + kAlign - 1) / kAlign * kAlign;
    const std::size_t begin =
        std::min(bytes, static_cast<std::size_t>(omp_get_thread_num()) * share);
    const std::size_t end = std::min(bytes, begin + share);
    if (end > begin) {
      std::memcpy(static_cast<std::byte*>(dst) + begin, static_cast<const std::byte*>(src) + begin,
                  end - begin);
    }
  }
}

/// The CPU backend's events: its work is done by the time a call returns, so every event is
/// ready when made.
class ReadyEvent final : public Event {
public:
  bool ready() const override { return true; }
  void synchronize() const override {}
};

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(int num_threads) {
    if (num_threads > 0) omp_set_num_threads(num_threads);
  }

  DeviceKind kind() const noexcept override { return DeviceKind::Cpu; }
  int device_id() const noexcept override { return 0; }
  int num_threads() const noexcept override { return omp_get_max_threads(); }

  void* allocate(std::size_t bytes) const override {
    // Large buffers are aligned to huge pages and advised as such: first touch of 4 KiB pages
    // is slow, and the kernels stream through these buffers every epoch.
    const bool huge = bytes >= kHugePage;
    const std::size_t align = huge ? kHugePage : 64;
    const std::size_t rounded = (bytes + align - 1) / align * align;
    void* ptr = std::aligned_alloc(align, rounded);
    if (ptr == nullptr) {
      throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
    }
    if (huge) madvise(ptr, rounded, MADV_HUGEPAGE);
    return ptr;
  }

  void deallocate(void* ptr, std::size_t) const noexcept override { std::free(ptr); }

  void copy_from_host(void* dst, const void* src, std::size_t bytes) const override {
    copy_bytes_parallel(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) const override {
    copy_bytes_parallel(dst, src, bytes);
  }
  void copy_within(void* dst, const void* src, std::size_t bytes) const override {
    copy_bytes_parallel(dst, src, bytes);
  }
  void zero_bytes(void* dst, std::size_t bytes) const override {
    if (bytes > 0) std::memset(dst, 0, bytes);
  }
  void synchronize() const override {}

  // Host memory is all the same to the CPU: "pinned" buffers are ordinary ones, and copies and
  // events complete before the call returns, so the engine runs one code path on both backends.
  void* allocate_pinned(std::size_t bytes) const override { return allocate(bytes); }
  void deallocate_pinned(void* ptr, std::size_t bytes) const noexcept override {
    deallocate(ptr, bytes);
  }
  std::shared_ptr<Event> copy_async(void* dst, const void* src, std::size_t bytes,
                                    CopyDirection) const override {
    copy_bytes_parallel(dst, src, bytes);
    return std::make_shared<ReadyEvent>();
  }
  std::shared_ptr<Event> record(Stream) const override { return std::make_shared<ReadyEvent>(); }
  void wait(Stream, const Event&) const override {}
  std::unique_ptr<AddressSpace> reserve_address_space(std::size_t reserve_bytes,
                                                      std::size_t slot_bytes,
                                                      int slots) const override {
    return detail::make_host_address_space(reserve_bytes, slot_bytes, slots);
  }
  std::size_t address_granularity() const override { return detail::host_page_size(); }

  std::string describe() const override {
    return "cpu (" + std::to_string(num_threads()) + " threads, OpenBLAS " + blas_core_name() + ")";
  }
};

} // namespace

/// Cores of the machine, not only those this process is bound to: mpirun binds each rank to
/// one core by default, and a rank asking for a few threads more is slow, not broken.
int machine_cores() {
  return std::max(omp_get_num_procs(), static_cast<int>(std::thread::hardware_concurrency()));
}

int max_cpu_threads() {
  return kThreadsPerCore * machine_cores();
}

BackendPtr make_cpu_backend(int num_threads) {
  // Far more threads than cores only slows the kernels down, and libgomp gives each thread a
  // stack: OMP_NUM_THREADS=100000 overflows in the first parallel region. Both ways of asking
  // (the argument, OpenMP's default from the environment) are checked here, before any
  // parallel region of the job runs.
  const int cap = max_cpu_threads();
  if (num_threads < 0 || num_threads > cap) {
    throw InvalidArgument("thread count must be in [0, " + std::to_string(cap) +
                          "] (0: OMP_NUM_THREADS or all cores; at most " +
                          std::to_string(kThreadsPerCore) + " per core of the " +
                          std::to_string(machine_cores()) + " available), got " +
                          std::to_string(num_threads));
  }
  if (num_threads == 0 && omp_get_max_threads() > cap) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    throw InvalidArgument(
        "OpenMP's default thread count " + std::to_string(omp_get_max_threads()) +
        " (OMP_NUM_THREADS=" + (env != nullptr ? env : "unset") + ") is more than " +
        std::to_string(cap) + " (" + std::to_string(kThreadsPerCore) + " per core of the " +
        std::to_string(machine_cores()) +
        " available): set OMP_NUM_THREADS or a thread count in [1, " + std::to_string(cap) + "]");
  }
  return std::make_shared<CpuBackend>(num_threads);
}

void copy_bytes(const Backend& to, void* dst, const Backend& from, const void* src,
                std::size_t bytes) {
  if (bytes == 0) return;
  const bool to_host = to.kind() == DeviceKind::Cpu, from_host = from.kind() == DeviceKind::Cpu;
  // A wrapping backend (a chunk manager's allocator) copies its own memory, which it may have
  // to bring in first; plain host memory is copied here.
  const bool to_plain = &to.target() == &to, from_plain = &from.target() == &from;
  if (to_host && from_host) {
    if (!to_plain && !from_plain) {
      to.copy_within(dst, src, bytes);
    } else if (!to_plain) {
      to.copy_from_host(dst, src, bytes);
    } else if (!from_plain) {
      from.copy_to_host(dst, src, bytes);
    } else {
      std::memcpy(dst, src, bytes);
    }
  } else if (from_host) {
    to.copy_from_host(dst, src, bytes);
  } else if (to_host) {
    from.copy_to_host(dst, src, bytes);
  } else if (to.device_id() == from.device_id()) {
    from.synchronize(); // the data may still be computed on the source's stream
    to.copy_within(dst, src, bytes);
    to.synchronize();
  } else {
    std::vector<std::byte> staging(bytes); // between two devices, through the host
    from.copy_to_host(staging.data(), src, bytes);
    to.copy_from_host(dst, staging.data(), bytes);
  }
}

} // namespace tessera
