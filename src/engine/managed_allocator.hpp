// The allocator a ChunkManager hands out (ChunkManager::allocator): a Backend whose Buffer
// memory comes from the manager's chunks, every other call forwarded to the backend it wraps.
// Private to the engine.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/engine/chunk_manager.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

/// Forwards every call to the backend it wraps, except that Buffer memory comes from a manager.
class ManagedAllocator final : public Backend {
public:
  ManagedAllocator(ChunkManager& manager, TensorKind kind)
      : manager_(manager), target_(*manager.backend()), kind_(kind) {}
  DeviceKind kind() const noexcept override { return target_.kind(); }
  int device_id() const noexcept override { return target_.device_id(); }
  int num_threads() const noexcept override { return target_.num_threads(); }
  void* allocate(std::size_t bytes) const override {
    const TensorSlot t =
        manager_.allocate(to_string(kind_) + " #" + std::to_string(++count_), kind_, bytes);
    try {
      // A buffer allocated in a scope is acquired whole there, so it must fit the device at
      // once; outside one (a module that acquires its own memory in blocks) it need not.
      if (manager_.scope() != nullptr) manager_.check_fits(t.id);
    } catch (...) {
      manager_.free(t.id);
      throw;
    }
    return t.data;
  }
  void deallocate(void* ptr, std::size_t) const noexcept override {
    manager_.free(manager_.find(ptr));
  }
  // Copies and zeroing through the allocator touch managed memory one chunk piece at a time,
  // each piece acquired for the call: setup code (a matrix copied in, a buffer zeroed) needs
  // no scope of its own and may fill a tensor of any size. Inside a scope the pieces are
  // already pinned and acquiring them again only counts.
  void copy_from_host(void* dst, const void* src, std::size_t bytes) const override {
    in_pieces(dst, nullptr, bytes, [&](std::size_t o, std::size_t n) {
      target_.copy_from_host(static_cast<std::byte*>(dst) + o,
                             static_cast<const std::byte*>(src) + o, n);
    });
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) const override {
    in_pieces(nullptr, src, bytes, [&](std::size_t o, std::size_t n) {
      target_.copy_to_host(static_cast<std::byte*>(dst) + o, static_cast<const std::byte*>(src) + o,
                           n);
    });
  }
  void copy_within(void* dst, const void* src, std::size_t bytes) const override {
    in_pieces(dst, src, bytes, [&](std::size_t o, std::size_t n) {
      target_.copy_within(static_cast<std::byte*>(dst) + o, static_cast<const std::byte*>(src) + o,
                          n);
    });
  }
  void zero_bytes(void* dst, std::size_t bytes) const override {
    in_pieces(dst, nullptr, bytes, [&](std::size_t o, std::size_t n) {
      target_.zero_bytes(static_cast<std::byte*>(dst) + o, n);
    });
  }
  void synchronize() const override { target_.synchronize(); }
  void* native_stream() const noexcept override { return target_.native_stream(); }
  std::string describe() const override { return target_.describe(); }
  void* allocate_pinned(std::size_t bytes) const override { return target_.allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr, std::size_t bytes) const noexcept override {
    target_.deallocate_pinned(ptr, bytes);
  }
  std::shared_ptr<Event> copy_async(void* dst, const void* src, std::size_t bytes,
                                    CopyDirection direction) const override {
    return target_.copy_async(dst, src, bytes, direction);
  }
  std::shared_ptr<Event> record(Stream stream) const override { return target_.record(stream); }
  void wait(Stream stream, const Event& event) const override { target_.wait(stream, event); }
  std::unique_ptr<AddressSpace> reserve_address_space(std::size_t reserve_bytes,
                                                      std::size_t slot_bytes,
                                                      int slots) const override {
    return target_.reserve_address_space(reserve_bytes, slot_bytes, slots);
  }
  std::size_t address_granularity() const override { return target_.address_granularity(); }
  const Backend& target() const noexcept override { return target_; }
  ChunkManager& manager() const noexcept { return manager_; }

private:
  /// Calls f(offset, n) over [0, bytes) in pieces that lie inside one chunk of `write` (written)
  /// and of `read` (read; either may be nullptr or memory the manager does not hold), with both
  /// pieces acquired for the call. Without a budget everything is on the device: one call.
  template <typename F>
  void in_pieces(const void* write, const void* read, std::size_t bytes, F f) const {
    if (!manager_.budgeted()) {
      f(0, bytes);
      return;
    }
    const auto* w = static_cast<const std::byte*>(write);
    const auto* r = static_cast<const std::byte*>(read);
    for (std::size_t o = 0; o < bytes;) {
      std::size_t n = bytes - o;
      if (w != nullptr) n = std::min(n, manager_.bytes_to_chunk_end(w + o));
      if (r != nullptr) n = std::min(n, manager_.bytes_to_chunk_end(r + o));
      Pins pins(&manager_);
      if (w != nullptr) pins.add(w + o, n, Access::Write);
      if (r != nullptr) pins.add(r + o, n, Access::Read);
      f(o, n);
      o += n;
    }
  }

  ChunkManager& manager_;
  const Backend& target_;
  TensorKind kind_;
  mutable std::uint64_t count_ = 0;
};

} // namespace tessera
