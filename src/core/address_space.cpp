// The CPU backend's address space: slots are anonymous memory moved (mremap, no copy) between
// their parking places and fixed offsets of a PROT_NONE reservation, so a chunk keeps its
// address while its bytes leave and come back, and large slots keep their huge pages.
#include "address_space.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace tessera::detail {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

constexpr std::size_t kHugePage = std::size_t{2} << 20;

/// `bytes` of inaccessible, unreserved address space starting at a multiple of `align`;
/// `*mapped` and `*mapped_bytes` get what to munmap.
std::byte* reserve(std::size_t bytes, std::size_t align, void** mapped, std::size_t* mapped_bytes) {
  *mapped_bytes = bytes + align;
  *mapped =
      mmap(nullptr, *mapped_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (*mapped == MAP_FAILED) {
    *mapped = nullptr;
    return nullptr;
  }
  const auto at = reinterpret_cast<std::uintptr_t>(*mapped);
  return reinterpret_cast<std::byte*>((at + align - 1) / align * align);
}

class HostAddressSpace final : public AddressSpace {
public:
  HostAddressSpace(std::size_t reserve_bytes, std::size_t slot_bytes, int slots)
      : slot_bytes_(slot_bytes), slots_(slots),
        mapped_at_(static_cast<std::size_t>(std::max(slots, 0)), -1) {
    const std::size_t page = host_page_size();
    if (slot_bytes == 0 || slot_bytes % page != 0) {
      throw InvalidArgument("address space: slot size " + std::to_string(slot_bytes) +
                            " bytes is not a positive multiple of the page size (" +
                            std::to_string(page) + " bytes)");
    }
    if (slots < 0) throw InvalidArgument("address space: negative slot count");
    const std::size_t offsets = (reserve_bytes + slot_bytes - 1) / slot_bytes;
    size_ = offsets * slot_bytes;
    // Both ranges start on a huge page, so slots of whole huge pages move with theirs.
    base_ = reserve(size_, kHugePage, &reserved_, &reserved_bytes_);
    park_ = base_ == nullptr ? nullptr
                             : reserve(slot_bytes * static_cast<std::size_t>(slots), kHugePage,
                                       &parked_, &parked_bytes_);
    if (park_ == nullptr) {
      const std::string why = errno_text();
      release();
      throw IoError("cannot reserve " + std::to_string(size_ >> 20) +
                    " MiB of address space: " + why);
    }
    // The slots' own memory, at their parking places until mapped.
    const std::size_t slot_memory = slot_bytes * static_cast<std::size_t>(slots);
    if (slot_memory > 0 &&
        (mmap(park_, slot_memory, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)) {
      const std::string why = errno_text();
      release();
      throw IoError("cannot make the device slots (" + std::to_string(slots) + " x " +
                    std::to_string(slot_bytes >> 10) + " KiB): " + why);
    }
    if (slot_memory > 0) madvise(park_, slot_memory, MADV_HUGEPAGE);
  }
  ~HostAddressSpace() override { release(); }
  HostAddressSpace(const HostAddressSpace&) = delete;
  HostAddressSpace& operator=(const HostAddressSpace&) = delete;

  std::byte* base() const noexcept override { return base_; }
  std::size_t size() const noexcept override { return size_; }
  std::size_t slot_bytes() const noexcept override { return slot_bytes_; }
  int slots() const noexcept override { return slots_; }

  void map(std::size_t offset, int slot) override {
    const std::size_t index = check_offset(offset);
    if (slot < 0 || slot >= slots_) {
      throw InvalidArgument("address space: slot " + std::to_string(slot) + " outside [0, " +
                            std::to_string(slots_) + ")");
    }
    if (const auto held = mapped_.find(index); held != mapped_.end()) {
      throw InvalidArgument("address space: offset " + std::to_string(offset) +
                            " already holds slot " + std::to_string(held->second));
    }
    if (const std::int64_t at = mapped_at_[static_cast<std::size_t>(slot)]; at >= 0) {
      throw InvalidArgument("address space: slot " + std::to_string(slot) +
                            " is already mapped at offset " +
                            std::to_string(static_cast<std::size_t>(at) * slot_bytes_));
    }
    // The pages move, not their bytes; MREMAP_DONTUNMAP leaves the parking place mapped (and
    // empty), so no other mapping of the process can take it meanwhile.
    move(parking(slot), base_ + offset, "map device slot " + std::to_string(slot));
    mapped_[index] = slot;
    mapped_at_[static_cast<std::size_t>(slot)] = static_cast<std::int64_t>(index);
  }

  void unmap(std::size_t offset) override {
    const std::size_t index = check_offset(offset);
    const auto held = mapped_.find(index);
    if (held == mapped_.end()) return;
    move(base_ + offset, parking(held->second),
         "unmap device slot " + std::to_string(held->second));
    // Left behind: an empty mapping inside the reservation; inaccessible again.
    if (mprotect(base_ + offset, slot_bytes_, PROT_NONE) != 0) {
      throw IoError("cannot protect the offset device slot " + std::to_string(held->second) +
                    " left: " + errno_text());
    }
    mapped_at_[static_cast<std::size_t>(held->second)] = -1;
    mapped_.erase(held);
  }

private:
  std::byte* parking(int slot) const noexcept {
    return park_ + static_cast<std::size_t>(slot) * slot_bytes_;
  }

  void move(std::byte* from, std::byte* to, const std::string& what) const {
    void* at = mremap(from, slot_bytes_, slot_bytes_,
                      MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to);
    if (at == MAP_FAILED) {
      throw IoError("cannot " + what +
                    " (mremap with MREMAP_DONTUNMAP needs Linux 5.7 or "
                    "newer): " +
                    errno_text());
    }
  }

  std::size_t check_offset(std::size_t offset) const {
    if (offset % slot_bytes_ != 0 || offset >= size_) {
      throw InvalidArgument("address space: offset " + std::to_string(offset) +
                            " is not a slot boundary inside the " + std::to_string(size_) +
                            "-byte range");
    }
    return offset / slot_bytes_;
  }

  void release() noexcept {
    if (reserved_ != nullptr) munmap(reserved_, reserved_bytes_);
    if (parked_ != nullptr) munmap(parked_, parked_bytes_);
    reserved_ = parked_ = nullptr;
    base_ = park_ = nullptr;
  }

  void* reserved_ = nullptr; // what reserve() mapped for base_ and park_ (with alignment slack)
  void* parked_ = nullptr;
  std::size_t reserved_bytes_ = 0, parked_bytes_ = 0;
  std::byte* park_ = nullptr;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::size_t slot_bytes_;
  int slots_;
  // The slot mapped at each mapped slot-sized offset (a table of every offset of a 1 TiB
  // reservation in 4 KiB slots would itself take 1 GiB).
  std::unordered_map<std::size_t, int> mapped_;
  std::vector<std::int64_t> mapped_at_; // [slot]: the offset index it is mapped at, or -1
};

} // namespace

std::unique_ptr<AddressSpace> make_host_address_space(std::size_t reserve_bytes,
                                                      std::size_t slot_bytes, int slots) {
  return std::make_unique<HostAddressSpace>(reserve_bytes, slot_bytes, slots);
}

std::size_t host_page_size() {
  return static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

} // namespace tessera::detail
