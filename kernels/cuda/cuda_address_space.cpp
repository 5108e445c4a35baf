// The CUDA backend's address space through the driver's virtual memory management API: one
// cuMemAddressReserve range, one cuMemCreate allocation per slot, cuMemMap/cuMemUnmap to move a
// slot in and out, so a chunk keeps its device address while its bytes go to the host and back.
#include "cuda_address_space.hpp"

#include "cuda_check.hpp"
#include "cuda_driver.hpp"
#include "tessera/core/error.hpp"

#include <cuda_runtime_api.h>
#include <fmt/core.h>
#include <string>
#include <vector>

namespace tessera::kernels::cuda {

namespace {

/// Pinned (non-migratable) memory on `device`: what the backend's kernels read.
CUmemAllocationProp device_memory(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

class DeviceAddressSpace final : public AddressSpace {
public:
  DeviceAddressSpace(int device, std::size_t reserve_bytes, std::size_t slot_bytes, int slots)
      : device_(device), slot_bytes_(slot_bytes), slots_(slots) {
    const std::size_t granularity = device_granularity(device);
    if (slot_bytes == 0 || slot_bytes % granularity != 0) {
      throw InvalidArgument(fmt::format("address space on device {}: slot size {} bytes is not a "
                                        "positive multiple of the allocation granularity ({} "
                                        "bytes)",
                                        device, slot_bytes, granularity));
    }
    if (slots < 0) {
      throw InvalidArgument(fmt::format("address space on device {}: slot count must be >= 0, "
                                        "got {}",
                                        device, slots));
    }
    const std::size_t offsets = (reserve_bytes + slot_bytes - 1) / slot_bytes;
    size_ = offsets * slot_bytes;
    mapped_.assign(offsets, -1);
    // A throw below leaves a partly built object whose destructor does not run: release() by hand.
    try {
      TESSERA_CUDA_CHECK(cudaSetDevice(device_));
      if (size_ > 0) {
        check(driver().mem_address_reserve(&base_, size_, 0, 0, 0), "cuMemAddressReserve");
      }
      const CUmemAllocationProp prop = device_memory(device_);
      handles_.reserve(static_cast<std::size_t>(slots));
      for (int s = 0; s < slots; ++s) {
        CUmemGenericAllocationHandle handle = 0;
        check(driver().mem_create(&handle, slot_bytes_, &prop, 0), "cuMemCreate");
        handles_.push_back(handle);
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~DeviceAddressSpace() override { release(); }
  DeviceAddressSpace(const DeviceAddressSpace&) = delete;
  DeviceAddressSpace& operator=(const DeviceAddressSpace&) = delete;

  std::byte* base() const noexcept override { return reinterpret_cast<std::byte*>(base_); }
  std::size_t size() const noexcept override { return size_; }
  std::size_t slot_bytes() const noexcept override { return slot_bytes_; }
  int slots() const noexcept override { return slots_; }

  void map(std::size_t offset, int slot) override {
    const std::size_t index = check_offset(offset);
    if (slot < 0 || slot >= slots_) {
      throw InvalidArgument(fmt::format("address space on device {}: slot {} outside [0, {})",
                                        device_, slot, slots_));
    }
    if (mapped_[index] >= 0) {
      throw InvalidArgument(fmt::format("address space on device {}: offset {} already holds "
                                        "slot {}",
                                        device_, offset, mapped_[index]));
    }
    TESSERA_CUDA_CHECK(cudaSetDevice(device_));
    const CUdeviceptr at = base_ + offset;
    check(driver().mem_map(at, slot_bytes_, 0, handles_[static_cast<std::size_t>(slot)], 0),
          "cuMemMap");
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    const CUresult status = driver().mem_set_access(at, slot_bytes_, &access, 1);
    if (status != CUDA_SUCCESS) {
      driver().mem_unmap(at, slot_bytes_); // a mapping without access is of no use to anyone
      check(status, "cuMemSetAccess");
    }
    mapped_[index] = slot;
  }

  void unmap(std::size_t offset) override {
    const std::size_t index = check_offset(offset);
    if (mapped_[index] < 0) return;
    TESSERA_CUDA_CHECK(cudaSetDevice(device_));
    check(driver().mem_unmap(base_ + offset, slot_bytes_), "cuMemUnmap");
    mapped_[index] = -1;
  }

private:
  std::size_t check_offset(std::size_t offset) const {
    if (offset % slot_bytes_ != 0 || offset >= size_) {
      throw InvalidArgument(fmt::format("address space on device {}: offset {} is not a slot "
                                        "boundary inside the {}-byte range",
                                        device_, offset, size_));
    }
    return offset / slot_bytes_;
  }

  /// Unmaps, releases and frees whatever is held; errors are ignored (destructors never throw,
  /// and nothing better can be done with memory that will not go back).
  void release() noexcept {
    cudaSetDevice(device_);
    for (std::size_t i = 0; i < mapped_.size(); ++i) {
      if (mapped_[i] >= 0) driver().mem_unmap(base_ + i * slot_bytes_, slot_bytes_);
      mapped_[i] = -1;
    }
    for (const CUmemGenericAllocationHandle handle : handles_)
      driver().mem_release(handle);
    handles_.clear();
    if (base_ != 0) driver().mem_address_free(base_, size_);
    base_ = 0;
  }

  int device_;
  CUdeviceptr base_ = 0;
  std::size_t size_ = 0;
  std::size_t slot_bytes_;
  int slots_;
  std::vector<CUmemGenericAllocationHandle> handles_; // per slot: its physical allocation
  std::vector<int> mapped_; // per slot-sized offset: the slot mapped there, or -1
};

} // namespace

std::unique_ptr<AddressSpace> make_device_address_space(int device, std::size_t reserve_bytes,
                                                        std::size_t slot_bytes, int slots) {
  return std::make_unique<DeviceAddressSpace>(device, reserve_bytes, slot_bytes, slots);
}

std::size_t device_granularity(int device) {
  const CUmemAllocationProp prop = device_memory(device);
  std::size_t granularity = 0;
  check(driver().mem_get_allocation_granularity(&granularity, &prop,
                                                CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity");
  return granularity;
}

} // namespace tessera::kernels::cuda
