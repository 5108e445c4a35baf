// Contract of the backend family: what the CUDA backend provides to the ops layer (device count,
// backend construction). The CPU backend lives in core; stubs stand in without CUDA.
#pragma once

#include "tessera/core/device.hpp"

#include <cstddef>

namespace tessera::kernels::cuda {

/// Whether these are the real CUDA entry points (false for the stubs).
bool compiled() noexcept;

/// Usable CUDA devices; 0 on any error (no driver, no GPU, CUDA not compiled). Never throws.
int device_count() noexcept;

/// The CUDA backend of `device`. Throws NotCompiled without CUDA.
BackendPtr make_backend(int device);

/// SpMM plans `backend` (a CUDA backend) holds now: one per (matrix, row range, width, values,
/// transpose) used since, dropped when the matrix (CsrT) is released. For tests of their
/// lifetime. Throws NotCompiled without CUDA.
std::size_t spmm_plan_count(const Backend& backend);

} // namespace tessera::kernels::cuda
