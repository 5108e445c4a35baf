// Checks and settings at the start of every program (job_start.hpp).
#include "tessera/runtime/job_start.hpp"

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/array_file.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fmt/core.h>
#include <string>
#include <string_view>
#include <unistd.h>

namespace tessera::runtime {

void check_same_command(comm::Communicator& comm, int argc, const char* const* argv) {
  if (comm.size() == 1) return;
  // The program by its file name (ranks may start it by another path), then each argument whole,
  // but for where a rank runs: its threads and device may differ (a CPU rank beside GPU ranks).
  constexpr std::string_view kPerRank[] = {"--threads", "--device"};
  std::uint32_t crc = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i > 0 && std::any_of(std::begin(kPerRank), std::end(kPerRank), [&](std::string_view flag) {
          return arg == flag || (arg.starts_with(flag) && arg.substr(flag.size()).starts_with("="));
        })) {
      if (arg.find('=') == std::string_view::npos) ++i; // and its value
      continue;
    }
    const std::string text =
        i == 0 ? std::filesystem::path(argv[0]).filename().string() : std::string(arg);
    crc = io::crc32_update(crc, text.data(), text.size() + 1); // with its terminating NUL
  }
  const std::vector<double> all = comm.allgather(static_cast<double>(crc));
  std::string differing;
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (differing.empty()) return;
  throw InvalidArgument(fmt::format(
      "rank(s) {} of this job were started with another command line than rank 0: every rank "
      "of an mpirun job runs the same program with the same flags (a launch such as "
      "'mpirun -np 1 A : -np 1 B' would train with settings that differ, or hang)",
      differing));
}

namespace {

extern "C" void on_broken_stdout(int) {
  // open and dup2 are async-signal-safe. The write that failed still fails (stdio drops or
  // keeps its bytes); every later one goes to /dev/null.
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
}

} // namespace

void reexec_with_fast_blas(char** argv) {
  const std::string core = fast_blas_core();
  if (core.empty()) return;
  // Never again: with the variable set, the re-executed program finds nothing to do.
  if (::setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // The exec failed (no /proc, say): run on as we are; the variable would only mislead the
  // warning, which tells the user what to set.
  ::unsetenv("OPENBLAS_CORETYPE");
}

void keep_running_without_stdout() {
  struct sigaction action {};
  action.sa_handler = on_broken_stdout;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGPIPE, &action, nullptr);
}

} // namespace tessera::runtime
