// Looking up the CUDA driver's functions through the runtime, and the check for their results.
#include "cuda_driver.hpp"

#include "cuda_check.hpp"
#include "tessera/core/error.hpp"

#include <cuda_runtime_api.h>
#include <fmt/core.h>

namespace tessera::kernels::cuda {

namespace {

/// Sets `function` to the driver's `symbol` in the version of the cuda.h compiled against (so
/// the pointer's type is the signature the driver hands out).
template <typename F> void get(F& function, const char* symbol) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  check(cudaGetDriverEntryPointByVersion(symbol, &address, CUDA_VERSION, cudaEnableDefault, &found),
        "cudaGetDriverEntryPointByVersion");
  if (found != cudaDriverEntryPointSuccess || address == nullptr) {
    throw CudaError(fmt::format(
        "the CUDA driver has no function {} in version {}.{} ({}); a newer driver is needed",
        symbol, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10,
        found == cudaDriverEntryPointVersionNotSufficent ? "version not sufficient"
                                                         : "symbol not found"));
  }
  function = reinterpret_cast<F>(address);
}

DriverApi load_driver() {
  DriverApi api{};
  get(api.mem_address_reserve, "cuMemAddressReserve");
  get(api.mem_address_free, "cuMemAddressFree");
  get(api.mem_create, "cuMemCreate");
  get(api.mem_release, "cuMemRelease");
  get(api.mem_map, "cuMemMap");
  get(api.mem_unmap, "cuMemUnmap");
  get(api.mem_set_access, "cuMemSetAccess");
  get(api.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  get(api.get_error_name, "cuGetErrorName");
  get(api.get_error_string, "cuGetErrorString");
  return api;
}

} // namespace

const DriverApi& driver() {
  static const DriverApi api = load_driver();
  return api;
}

void check(CUresult status, const char* call, std::source_location where) {
  if (status == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* message = nullptr;
  driver().get_error_name(status, &name);
  driver().get_error_string(status, &message);
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  throw CudaError(fmt::format("{} failed on device {}: {} ({})", call, device,
                              message != nullptr ? message : "unknown error",
                              name != nullptr ? name : std::to_string(static_cast<int>(status))),
                  where);
}

} // namespace tessera::kernels::cuda
