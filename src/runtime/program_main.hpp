// The main() every training program shares: MPI start (or a one-rank job without a launcher),
// the same command on every rank, flag parsing, and one way to end on an error.
#pragma once

#include "tessera/comm/communicator.hpp"

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

namespace tessera::runtime {

/// What a program adds to the shared main.
struct ProgramParts {
  std::string description; ///< the first line of --help
  /// Declares the program's flags on `app` (their values live in the caller's options).
  std::function<void(CLI::App& app)> add_flags;
  /// Runs the parsed job on this rank (rank 0 prints the results). Throws on any error.
  std::function<void(const CLI::App& app, const std::shared_ptr<comm::Communicator>& comm)> run;
  /// What rank 0 adds to the message of a run every rank stopped (gnn::TrainingStopped): where
  /// its checkpoint is, say. Optional.
  std::function<std::string(int epoch, int signal)> stopped_note;
};

/// Starts MPI under a launcher (else a one-rank job without MPI), checks every rank runs the
/// same command, parses the flags and runs the job. Errors end as "[rank r] error: ..."; a rank
/// that fails alone aborts the job (the others may wait for it in a collective); a stop every
/// rank agreed on (a signal, a diverged loss) needs no abort. Returns main's exit status: 0, 1,
/// or 128 + the signal that stopped training.
int program_main(int argc, char** argv, const ProgramParts& parts);

} // namespace tessera::runtime
