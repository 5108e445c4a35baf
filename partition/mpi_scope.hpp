// MPI for the partitioners that need it (Zoltan, PT-Scotch), also in a process that did not start
// it: a one-process tessera-partition, a library user's program, a unit test.
#pragma once

#include <mpi.h>

namespace tessera::partition::detail {

/// Initializes MPI (MPI_THREAD_FUNNELED) when nothing has yet, and finalizes it when the process
/// exits; does nothing when MPI is already initialized. Throws MpiError when MPI was already
/// finalized or cannot be initialized.
void ensure_mpi();

/// The number of ranks of `comm`.
int mpi_size(MPI_Comm comm);

} // namespace tessera::partition::detail
