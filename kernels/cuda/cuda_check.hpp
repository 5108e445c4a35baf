// Checks for CUDA runtime, cuBLAS and cuSPARSE calls: a failure throws the library's error type
// quoting the call, the library's message and the device.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>
#include <source_location>

namespace tessera::kernels::cuda {

void check(cudaError_t status, const char* call,
           std::source_location where = std::source_location::current());
void check(cublasStatus_t status, const char* call,
           std::source_location where = std::source_location::current());
void check(cusparseStatus_t status, const char* call,
           std::source_location where = std::source_location::current());

/// After a kernel launch: throws CudaError naming `kernel` when the launch failed.
void check_launch(const char* kernel, std::source_location where = std::source_location::current());

} // namespace tessera::kernels::cuda

#define TESSERA_CUDA_CHECK(call) ::tessera::kernels::cuda::check((call), #call)
