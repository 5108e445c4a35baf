// Loading cuBLAS and cuSPARSE (and any other CUDA library) with dlopen.
#include "cuda_libraries.hpp"

#include "tessera/core/error.hpp"

#include <dlfcn.h>
#include <fmt/core.h>
#include <string>

namespace tessera::kernels::cuda {

SharedLibrary::SharedLibrary(const std::string& soname) : name_(soname) {
  handle_ = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const std::string in_toolkit = std::string(TESSERA_CUDA_LIBRARY_DIR) + "/" + soname;
    handle_ = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (handle_ == nullptr) {
    const char* why = dlerror();
    throw CudaError(
        fmt::format("cannot load {} (searched the run path, LD_LIBRARY_PATH and {}): {}", soname,
                    TESSERA_CUDA_LIBRARY_DIR, why != nullptr ? why : "?"));
  }
}

void* SharedLibrary::address(const char* symbol) const {
  void* address = dlsym(handle_, symbol);
  if (address == nullptr) throw CudaError(fmt::format("{} has no function {}", name_, symbol));
  return address;
}

namespace {

CublasApi load_cublas() {
  const SharedLibrary lib("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  CublasApi api{};
  lib.get(api.create, "cublasCreate_v2");
  lib.get(api.destroy, "cublasDestroy_v2");
  lib.get(api.set_stream, "cublasSetStream_v2");
  lib.get(api.sgemm, "cublasSgemm_v2");
  lib.get(api.dgemm, "cublasDgemm_v2");
  lib.get(api.sgemv, "cublasSgemv_v2");
  lib.get(api.dgemv, "cublasDgemv_v2");
  lib.get(api.status_string, "cublasGetStatusString");
  lib.get(api.status_name, "cublasGetStatusName");
  return api;
}

CusparseApi load_cusparse() {
  const SharedLibrary lib("libcusparse.so." + std::to_string(CUSPARSE_VER_MAJOR));
  CusparseApi api{};
  lib.get(api.create, "cusparseCreate");
  lib.get(api.destroy, "cusparseDestroy");
  lib.get(api.set_stream, "cusparseSetStream");
  lib.get(api.create_csr, "cusparseCreateCsr");
  lib.get(api.create_dn_mat, "cusparseCreateDnMat");
  lib.get(api.destroy_sp_mat, "cusparseDestroySpMat");
  lib.get(api.destroy_dn_mat, "cusparseDestroyDnMat");
  lib.get(api.dn_mat_set_values, "cusparseDnMatSetValues");
  lib.get(api.spmm_buffer_size, "cusparseSpMM_bufferSize");
  lib.get(api.spmm, "cusparseSpMM");
  lib.get(api.error_string, "cusparseGetErrorString");
  lib.get(api.error_name, "cusparseGetErrorName");
  return api;
}

} // namespace

const CublasApi& cublas() {
  static const CublasApi api = load_cublas();
  return api;
}

const CusparseApi& cusparse() {
  static const CusparseApi api = load_cusparse();
  return api;
}

} // namespace tessera::kernels::cuda
