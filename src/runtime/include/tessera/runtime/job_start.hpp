// What every program does as it starts, before it parses or reads anything: check that all ranks
// of an mpirun job run one command, and keep a closed stdout from ending a run silently.
#pragma once

#include "tessera/comm/communicator.hpp"

namespace tessera::runtime {

/// Every rank of a job runs the same command line: a launch that gives ranks other flags
/// (`mpirun -np 1 tessera-train --seed 1 : -np 1 tessera-train --seed 2`) would train with
/// settings that differ in silence, or wait forever for a peer in another step. Compares the CRC
/// of each rank's program name and arguments (one allgather) and throws InvalidArgument on every
/// rank naming the ranks whose command is not rank 0's. Where a rank runs may differ: --threads
/// and --device (with their values) are left out. Collective; nothing for one rank.
void check_same_command(comm::Communicator& comm, int argc, const char* const* argv);

/// Re-executes this program (/proc/self/exe, the same arguments) with OPENBLAS_CORETYPE set to
/// fast_blas_core() when that is not empty: OpenBLAS reads the variable once, as it loads, before
/// main runs, so it cannot be chosen later. A value the user set is kept. Call first in main,
/// before threads or MPI start. Returns when nothing is to be done, or when the exec failed (the
/// backend's blas_performance_warning then says what to set).
void reexec_with_fast_blas(char** argv);

/// A reader that closes stdout early (`tessera-train ... --report r.json | head -1`) would end
/// the process by SIGPIPE on its next line, before its report or checkpoint is written and without
/// a word. After this call the first such write points stdout at /dev/null instead: the run goes
/// on and writes its files; what it prints from then on is dropped.
void keep_running_without_stdout();

} // namespace tessera::runtime
