// The NCCL entry points of a build without NCCL (with or without the CUDA backend): none there,
// and NotCompiled on use.
#include "tessera/kernels/nccl_kernels.hpp"

#include "tessera/core/error.hpp"

namespace tessera::kernels::cuda {

namespace {

[[noreturn]] void no_nccl(const char* call) {
  throw NotCompiled(std::string(call) + ": this build has no NCCL (it comes with the CUDA backend "
                                        "when nccl.h and libnccl are found)");
}

} // namespace

bool nccl_compiled() noexcept {
  return false;
}

NcclId nccl_unique_id() {
  no_nccl("nccl_unique_id");
}

std::unique_ptr<NcclComm> make_nccl_comm(const NcclId&, int, int, const Backend&) {
  no_nccl("make_nccl_comm");
}

bool is_device_memory(const void*) noexcept {
  return false;
}

std::string nccl_version() {
  return "no NCCL";
}

} // namespace tessera::kernels::cuda
