// NCCL entry points of a build without NCCL: none there, and NotCompiled on use.
#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"

namespace tessera::comm {

bool nccl_compiled() noexcept {
  return false;
}

std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator>, BackendPtr) {
  throw NotCompiled("NCCL: this build has no NCCL (it comes with the CUDA backend when nccl.h "
                    "and libnccl are found)");
}

} // namespace tessera::comm
