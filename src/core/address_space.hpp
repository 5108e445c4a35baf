// The CPU backend's address space: a reserved range whose slots are anonymous memory moved in.
#pragma once

#include "tessera/core/device.hpp"

#include <cstddef>
#include <memory>

namespace tessera::detail {

/// A reserved, inaccessible range of `reserve_bytes` (rounded up to whole slots) and `slots`
/// slots of `slot_bytes` (a multiple of host_page_size()) of anonymous memory; map() moves a
/// slot's pages to an offset (mremap: page tables, no copy; huge pages stay huge), unmap() moves
/// them back and makes the offset inaccessible again. A slot's pages are allocated when first
/// touched and kept until the object is destroyed.
std::unique_ptr<AddressSpace> make_host_address_space(std::size_t reserve_bytes,
                                                      std::size_t slot_bytes, int slots);

/// The host's page size (sysconf(_SC_PAGESIZE)).
std::size_t host_page_size();

} // namespace tessera::detail
