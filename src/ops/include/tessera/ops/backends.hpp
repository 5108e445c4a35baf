// Which backends this build has and making one: the CPU backend is core's (make_cpu_backend);
// the CUDA backend comes from the kernels layer, whose stubs stand in when CUDA is not built.
#pragma once

#include "tessera/core/device.hpp"

#include <string>

namespace tessera {

/// Whether this build has the CUDA backend (TESSERA_WITH_CUDA).
bool cuda_compiled() noexcept;

/// CUDA devices this process can use: 0 when the build has no CUDA backend, the driver is
/// missing or too old, or there is no GPU (never throws).
int cuda_device_count() noexcept;

/// A backend on CUDA device `device`: its own stream, cuBLAS and cuSPARSE handles, and a
/// stream-ordered caching allocator. Throws NotCompiled in a build without CUDA, and
/// InvalidArgument / CudaError when the device does not exist or cannot be used.
BackendPtr make_cuda_backend(int device = 0);

/// Where a process trains: the CPU, a GPU (required), or a GPU when one is free (else the CPU).
enum class DeviceChoice { Cpu, Cuda, Auto };

/// The backend of a process that is rank `local_rank` among the ranks of one node: Cpu gives
/// the CPU backend (`cpu_threads` as in make_cpu_backend); Cuda gives GPU `local_rank` and
/// throws InvalidArgument when the node has no such GPU; Auto gives GPU `local_rank` when the
/// node has one, else the CPU — so one job can mix GPU and CPU ranks.
BackendPtr select_backend(DeviceChoice choice, int local_rank, int cpu_threads = 0);

} // namespace tessera
