// The backend entry points of a build without CUDA: no devices, and NotCompiled on use.
#include "tessera/kernels/backend_kernels.hpp"

#include "not_compiled.hpp"

namespace tessera::kernels::cuda {

bool compiled() noexcept {
  return false;
}

int device_count() noexcept {
  return 0;
}

BackendPtr make_backend(int) {
  not_compiled("backend");
}

std::size_t spmm_plan_count(const Backend&) {
  not_compiled("spmm_plan_count");
}

} // namespace tessera::kernels::cuda
