// Contract of the NCCL family: a communicator over the GPU ranks of a job that sums floats and
// exchanges bytes in device memory on a CUDA backend's stream. comm's NCCL communicator is built
// on it (src/comm/nccl_communicator.cpp); stubs stand in when the build has no NCCL.
#pragma once

#include "tessera/core/device.hpp"

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace tessera::kernels::cuda {

/// Whether this build has NCCL (false for the stubs).
bool nccl_compiled() noexcept;

/// The bytes of an ncclUniqueId: made by one rank, handed to the others by the caller.
using NcclId = std::array<std::byte, 128>;

/// A fresh id for a new communicator. Throws NcclError, or NotCompiled without NCCL.
NcclId nccl_unique_id();

/// One message of a device exchange: bytes to send to `peer`, or where the bytes from `peer`
/// land (it sends data.size() bytes). Device memory of the communicator's GPU.
struct DeviceSend {
  int peer = 0;
  std::span<const std::byte> data;
};
struct DeviceRecv {
  int peer = 0;
  std::span<std::byte> data;
};

/// One rank's NCCL communicator, bound to a CUDA backend's device and stream: everything it does
/// is queued on that stream (later kernels there see the results; the host does not wait).
class NcclComm {
public:
  virtual ~NcclComm() = default;
  /// values ← Σ over ranks of values, in place. Device memory. Collective.
  virtual void allreduce_sum(std::span<float> values) = 0;
  /// Grouped sends and receives (ncclGroupStart/End); every rank named must post the matching
  /// message. Device memory; buffers stay untouched until the stream reaches them.
  virtual void exchange(std::span<const DeviceSend> sends, std::span<const DeviceRecv> recvs) = 0;
  /// Aborts the communicator (a failing job); never throws.
  virtual void abort() noexcept = 0;
};

/// Joins rank `rank` of `size` to the communicator of `id` (the same on every rank) on `gpu`'s
/// device and stream. Collective over the `size` ranks. Throws NcclError / CudaError, or
/// NotCompiled without NCCL.
std::unique_ptr<NcclComm> make_nccl_comm(const NcclId& id, int rank, int size, const Backend& gpu);

/// Whether `ptr` points into device (or managed) memory; false for host memory and without NCCL.
bool is_device_memory(const void* ptr) noexcept;

/// "NCCL 2.27.7" (the version compiled against), or "no NCCL".
std::string nccl_version();

} // namespace tessera::kernels::cuda
