// cuBLAS, cuSPARSE (and NCCL, in nccl_kernels.cpp) are loaded on first use rather than linked:
// cuBLAS and cuSPARSE add about 250 MB of resident memory to any process that loads them, which a
// CPU-only run should not pay, and a binary that merely lacks NCCL still runs.
#pragma once

#include <cublas_v2.h>
#include <cusparse.h>
#include <string>

namespace tessera::kernels::cuda {

/// A shared library opened for the life of the process (never closed: its functions stay in
/// use): by soname (run path, LD_LIBRARY_PATH), then from the CUDA toolkit folder this build
/// was configured with. Throws CudaError naming the file and dlerror() when it cannot be loaded.
class SharedLibrary {
public:
  explicit SharedLibrary(const std::string& soname);
  /// Sets `function` to the library's `symbol`; throws CudaError when it has none.
  template <typename F> void get(F& function, const char* symbol) const {
    function = reinterpret_cast<F>(address(symbol));
  }

private:
  void* address(const char* symbol) const;
  std::string name_;
  void* handle_ = nullptr;
};

/// The cuBLAS functions the kernels call (cublas_v2.h's names map to the _v2 symbols).
struct CublasApi {
  decltype(&cublasCreate) create;
  decltype(&cublasDestroy) destroy;
  decltype(&cublasSetStream) set_stream;
  decltype(&cublasSgemm) sgemm;
  decltype(&cublasDgemm) dgemm;
  decltype(&cublasSgemv) sgemv;
  decltype(&cublasDgemv) dgemv;
  decltype(&cublasGetStatusString) status_string;
  decltype(&cublasGetStatusName) status_name;
};

struct CusparseApi {
  decltype(&cusparseCreate) create;
  decltype(&cusparseDestroy) destroy;
  decltype(&cusparseSetStream) set_stream;
  decltype(&cusparseCreateCsr) create_csr;
  decltype(&cusparseCreateDnMat) create_dn_mat;
  decltype(&cusparseDestroySpMat) destroy_sp_mat;
  decltype(&cusparseDestroyDnMat) destroy_dn_mat;
  decltype(&cusparseDnMatSetValues) dn_mat_set_values;
  decltype(&cusparseSpMM_bufferSize) spmm_buffer_size;
  decltype(&cusparseSpMM) spmm;
  decltype(&cusparseGetErrorString) error_string;
  decltype(&cusparseGetErrorName) error_name;
};

/// The libraries' functions, loaded once (thread-safe). Throws CudaError naming the library
/// file and dlerror() when it cannot be loaded.
const CublasApi& cublas();
const CusparseApi& cusparse();

} // namespace tessera::kernels::cuda
