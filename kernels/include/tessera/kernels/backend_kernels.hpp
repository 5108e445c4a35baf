// Contract of the backend family: what the CUDA backend provides to the ops layer (device count,
// backend construction). The CPU backend lives in core; stubs stand in without CUDA.
#pragma once

#include "tessera/core/device.hpp"

namespace tessera::kernels::cuda {

/// Whether these are the real CUDA entry points (false for the stubs).
bool compiled() noexcept;

/// Usable CUDA devices; 0 on any error (no driver, no GPU, CUDA not compiled). Never throws.
int device_count() noexcept;

/// The CUDA backend of `device`. Throws NotCompiled without CUDA.
BackendPtr make_backend(int device);

}  // namespace tessera::kernels::cuda
