// program_main: the start, parse and error handling of tessera-train, tessera-mlp and any
// program built on train_main.
#include "program_main.hpp"

#include "tessera/core/error.hpp"
#include "tessera/gnn/trainer.hpp"
#include "tessera/runtime/cli_options.hpp"
#include "tessera/runtime/job_start.hpp"

#include <cstdio>
#include <exception>
#include <fmt/core.h>

namespace tessera::runtime {

int program_main(int argc, char** argv, const ProgramParts& parts) {
  reexec_with_fast_blas(argv);
  std::unique_ptr<comm::MpiEnvironment> mpi;
  std::shared_ptr<comm::Communicator> comm;
  try {
    // Without a launcher this is a one-rank job: MPI (and its plugins) is not even started.
    if (comm::launched_by_mpi()) {
      mpi = std::make_unique<comm::MpiEnvironment>(&argc, &argv);
      comm = comm::make_mpi_communicator();
    } else {
      comm = comm::make_self_communicator();
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "[rank {}] error: {}\n", comm::world_rank(), e.what());
    return 1;
  }
  const int rank = comm->rank();
  keep_running_without_stdout();
  try {
    check_same_command(*comm, argc, argv);
  } catch (const InvalidArgument& e) {
    // Every rank knows; one says it.
    if (rank == 0) fmt::print(stderr, "[rank 0] error: {}\n", e.what());
    return 1;
  }

  CLI::App app{parts.description};
  parts.add_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
  }

  try {
    parts.run(app, comm);
  } catch (const gnn::TrainingStopped& e) {
    // Every rank stopped after the same epoch: one message, and no abort is needed.
    if (rank == 0) {
      const std::string note = parts.stopped_note ? parts.stopped_note(e.epoch(), e.signal()) : "";
      fmt::print(stderr, "[rank {}] error: {}{}\n", rank, e.what(), note);
      std::fflush(stderr);
    }
    return e.signal() != 0 ? 128 + e.signal() : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "[rank {}] error: {}\n", rank, error_text(e));
    std::fflush(stderr);
    // Other ranks may be waiting in a collective for this one: end the whole job now.
    if (comm->size() > 1) comm->abort(1);
    return 1;
  }
  return 0;
}

} // namespace tessera::runtime
