// Backend selection: the CPU backend from core, the CUDA one through the kernels' backend family.
#include "tessera/ops/backends.hpp"

#include "tessera/core/error.hpp"
#include "tessera/kernels/backend_kernels.hpp"

namespace tessera {

bool cuda_compiled() noexcept {
  return kernels::cuda::compiled();
}

int cuda_device_count() noexcept {
  return kernels::cuda::device_count();
}

BackendPtr make_cuda_backend(int device) {
  return kernels::cuda::make_backend(device);
}

BackendPtr select_backend(DeviceChoice choice, int local_rank, int cpu_threads) {
  if (choice == DeviceChoice::Cpu) return make_cpu_backend(cpu_threads);
  const int gpus = cuda_device_count();
  if (local_rank < gpus) return make_cuda_backend(local_rank);
  if (choice == DeviceChoice::Auto) return make_cpu_backend(cpu_threads);
  throw InvalidArgument(
      "a GPU was asked for (device choice cuda), but this process is rank " +
      std::to_string(local_rank) + " on its node, which " +
      (gpus == 0 ? std::string(cuda_compiled() ? "has no GPU visible"
                                               : "runs a build without the CUDA backend")
                 : "has only " + std::to_string(gpus) + " GPU" + (gpus == 1 ? "" : "s")) +
      " (the device choice auto puts ranks without a GPU on CPU cores)");
}

} // namespace tessera
