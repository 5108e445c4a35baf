// The CUDA driver functions the backend calls (virtual memory management), reached through the
// runtime's cudaGetDriverEntryPointByVersion rather than linked: a build links only the runtime,
// and a CPU-only run must not need libcuda.so. Private to kernels/cuda.
#pragma once

#include <cuda.h>
#include <source_location>

namespace tessera::kernels::cuda {

/// The driver's virtual memory management functions and its error strings (cuda.h's names).
struct DriverApi {
  decltype(&cuMemAddressReserve) mem_address_reserve;
  decltype(&cuMemAddressFree) mem_address_free;
  decltype(&cuMemCreate) mem_create;
  decltype(&cuMemRelease) mem_release;
  decltype(&cuMemMap) mem_map;
  decltype(&cuMemUnmap) mem_unmap;
  decltype(&cuMemSetAccess) mem_set_access;
  decltype(&cuMemGetAllocationGranularity) mem_get_allocation_granularity;
  decltype(&cuGetErrorName) get_error_name;
  decltype(&cuGetErrorString) get_error_string;
};

/// The driver's functions, looked up once (thread-safe), in the versions of the cuda.h this
/// build was compiled with. Throws CudaError naming the function the driver does not have.
const DriverApi& driver();

/// Throws CudaError quoting `call`, the driver's error name and message and the device.
void check(CUresult status, const char* call,
           std::source_location where = std::source_location::current());

} // namespace tessera::kernels::cuda
