// The CUDA backend's address space: a reserved device range whose slots are physical device
// allocations (cuMemCreate) mapped in and out at fixed offsets. Private to kernels/cuda.
#pragma once

#include "tessera/core/device.hpp"

#include <cstddef>
#include <memory>

namespace tessera::kernels::cuda {

/// A reserved device range of `reserve_bytes` (rounded up to whole slots) on device `device`
/// and `slots` physical slots of `slot_bytes` (a multiple of device_granularity(device)) made
/// with cuMemCreate when the space is made; map() maps a slot with cuMemMap and gives the device
/// read-write access; unmap() removes the mapping. Throws InvalidArgument for a slot size that is
/// not a positive multiple of the granularity or a negative slot count, CudaError naming the
/// driver call when the memory cannot be had.
std::unique_ptr<AddressSpace> make_device_address_space(int device, std::size_t reserve_bytes,
                                                        std::size_t slot_bytes, int slots);

/// The minimum allocation granularity of pinned device memory on `device`
/// (cuMemGetAllocationGranularity, CU_MEM_ALLOC_GRANULARITY_MINIMUM): 2 MiB on current GPUs.
std::size_t device_granularity(int device);

} // namespace tessera::kernels::cuda
