// A test backend whose tensors follow one another in one zeroed host buffer, so tests can make
// parameters with adjacent gradients (as the chunk manager lays them out); all else is the CPU
// backend's.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::testing {

/// Hands out consecutive ranges of a zeroed arena of `capacity` bytes, each start aligned to
/// 64 bytes as the CPU backend aligns its allocations (so a tensor of 5 floats leaves 44 bytes
/// of zero padding before the next one). Memory comes back only when the backend goes.
class ArenaBackend final : public Backend {
public:
  explicit ArenaBackend(std::size_t capacity)
      : cpu_(make_cpu_backend(1)), arena_(capacity + kAlign) {}

  /// Leaves `bytes` unused before the next allocation (to separate two tensors).
  void skip(std::size_t bytes) const { used_ += bytes; }

  DeviceKind kind() const noexcept override { return DeviceKind::Cpu; }
  int device_id() const noexcept override { return 0; }
  int num_threads() const noexcept override { return cpu_->num_threads(); }
  void* allocate(std::size_t bytes) const override {
    const auto base = reinterpret_cast<std::uintptr_t>(arena_.data());
    const std::uintptr_t at = (base + used_ + kAlign - 1) / kAlign * kAlign;
    if (at + bytes > base + arena_.size()) {
      throw Error("ArenaBackend: " + std::to_string(bytes) + " bytes do not fit the arena");
    }
    used_ = at + bytes - base;
    return reinterpret_cast<void*>(at);
  }
  void deallocate(void*, std::size_t) const noexcept override {}
  void copy_from_host(void* dst, const void* src, std::size_t bytes) const override {
    cpu_->copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) const override {
    cpu_->copy_to_host(dst, src, bytes);
  }
  void copy_within(void* dst, const void* src, std::size_t bytes) const override {
    cpu_->copy_within(dst, src, bytes);
  }
  void zero_bytes(void* dst, std::size_t bytes) const override { cpu_->zero_bytes(dst, bytes); }
  void synchronize() const override {}
  void* allocate_pinned(std::size_t bytes) const override { return cpu_->allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr, std::size_t bytes) const noexcept override {
    cpu_->deallocate_pinned(ptr, bytes);
  }
  std::shared_ptr<Event> copy_async(void* dst, const void* src, std::size_t bytes,
                                    CopyDirection direction) const override {
    return cpu_->copy_async(dst, src, bytes, direction);
  }
  std::shared_ptr<Event> record(Stream stream) const override { return cpu_->record(stream); }
  void wait(Stream stream, const Event& event) const override { cpu_->wait(stream, event); }
  std::unique_ptr<AddressSpace> reserve_address_space(std::size_t reserve_bytes,
                                                      std::size_t slot_bytes,
                                                      int slots) const override {
    return cpu_->reserve_address_space(reserve_bytes, slot_bytes, slots);
  }
  std::size_t address_granularity() const override { return cpu_->address_granularity(); }
  std::string describe() const override { return "arena over " + cpu_->describe(); }

private:
  static constexpr std::size_t kAlign = 64;
  BackendPtr cpu_;
  mutable std::vector<std::byte> arena_;
  mutable std::size_t used_ = 0;
};

} // namespace tessera::testing
