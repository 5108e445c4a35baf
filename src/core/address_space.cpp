// The CPU backend's address space: slots are pieces of a memfd, mapped at fixed offsets of a
// PROT_NONE reservation, so a chunk keeps its address while its bytes leave and come back.
#include "address_space.hpp"

#include "tessera/core/error.hpp"

#include <cerrno>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <unordered_map>

namespace tessera::detail {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

class HostAddressSpace final : public AddressSpace {
public:
  HostAddressSpace(std::size_t reserve_bytes, std::size_t slot_bytes, int slots)
      : slot_bytes_(slot_bytes), slots_(slots) {
    const std::size_t page = host_page_size();
    if (slot_bytes == 0 || slot_bytes % page != 0) {
      throw InvalidArgument("address space: slot size " + std::to_string(slot_bytes) +
                            " bytes is not a positive multiple of the page size (" +
                            std::to_string(page) + " bytes)");
    }
    if (slots < 0) throw InvalidArgument("address space: negative slot count");
    const std::size_t offsets = (reserve_bytes + slot_bytes - 1) / slot_bytes;
    size_ = offsets * slot_bytes;
    void* base =
        mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      throw IoError("cannot reserve " + std::to_string(size_ >> 20) +
                    " MiB of address space: " + errno_text());
    }
    base_ = static_cast<std::byte*>(base);
    fd_ = memfd_create("tessera-device-slots", MFD_CLOEXEC);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(slot_bytes * slots)) != 0) {
      const std::string why = errno_text();
      release();
      throw IoError("cannot create the device slots (" + std::to_string(slots) + " x " +
                    std::to_string(slot_bytes >> 10) + " KiB memory file): " + why);
    }
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
    // MAP_POPULATE builds the page tables now, so kernels do not take a fault per page.
    void* at = mmap(base_ + offset, slot_bytes_, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd_,
                    static_cast<off_t>(static_cast<std::size_t>(slot) * slot_bytes_));
    if (at == MAP_FAILED) {
      throw IoError("cannot map device slot " + std::to_string(slot) + ": " + errno_text());
    }
    madvise(at, slot_bytes_, MADV_HUGEPAGE); // a hint; shmem huge pages may be off
    mapped_[index] = slot;
  }

  void unmap(std::size_t offset) override {
    const std::size_t index = check_offset(offset);
    const auto held = mapped_.find(index);
    if (held == mapped_.end()) return;
    // Replacing the mapping (rather than munmap) keeps the range reserved and inaccessible.
    void* at = mmap(base_ + offset, slot_bytes_, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (at == MAP_FAILED) {
      throw IoError("cannot unmap device slot " + std::to_string(held->second) + ": " +
                    errno_text());
    }
    mapped_.erase(held);
  }

private:
  std::size_t check_offset(std::size_t offset) const {
    if (offset % slot_bytes_ != 0 || offset >= size_) {
      throw InvalidArgument("address space: offset " + std::to_string(offset) +
                            " is not a slot boundary inside the " + std::to_string(size_) +
                            "-byte range");
    }
    return offset / slot_bytes_;
  }

  void release() noexcept {
    if (base_ != nullptr) munmap(base_, size_);
    if (fd_ >= 0) close(fd_);
    base_ = nullptr;
    fd_ = -1;
  }

  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::size_t slot_bytes_;
  int slots_;
  int fd_ = -1;
  // The slot mapped at each mapped slot-sized offset (a table of every offset of a 1 TiB
  // reservation in 4 KiB slots would itself take 1 GiB).
  std::unordered_map<std::size_t, int> mapped_;
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
