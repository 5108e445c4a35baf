// Shared pieces of the MPI tests: the job's communicator.
#pragma once

#include <memory>
#include <tessera/comm/communicator.hpp>

namespace tessera::testing {

/// The communicator over all ranks of the test job (made once, after MPI_Init).
std::shared_ptr<comm::Communicator> world();

} // namespace tessera::testing
