#include "mpi_scope.hpp"

#include "tessera/core/error.hpp"

#include <cstdlib>
#include <string>

namespace tessera::partition::detail {

namespace {

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

} // namespace

void ensure_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw MpiError("partitioning needs MPI, which this process already finalized");
  if (initialized) return;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    throw MpiError("MPI_Init_thread failed (the partitioners run on MPI)");
  }
  std::atexit(finalize_at_exit);
}

int mpi_size(MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  return size;
}

} // namespace tessera::partition::detail
