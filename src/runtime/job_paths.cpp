// Outputs of a job that would write over its own inputs, refused before anything is read.
#include "tessera/runtime/job_paths.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <filesystem>
#include <sys/stat.h>

namespace tessera::runtime {

namespace {

namespace fs = std::filesystem;

/// Where `path` is (or would be): absolute, links resolved as far as it exists, no "." or "..".
fs::path where(const std::string& path) {
  std::error_code error;
  fs::path resolved = fs::weakly_canonical(fs::absolute(path, error), error);
  if (error) resolved = fs::absolute(path, error).lexically_normal();
  return resolved;
}

/// Whether `inner` is `outer` or lies inside it, comparing whole components.
bool within(const fs::path& inner, const fs::path& outer) {
  auto a = inner.begin(), b = outer.begin();
  for (; b != outer.end(); ++a, ++b) {
    if (b->empty()) continue; // a trailing separator
    if (a == inner.end() || *a != *b) return false;
  }
  return true;
}

/// Whether `a` and `b` are one existing file (one inode: a hard link or another name of it).
bool same_file(const std::string& a, const std::string& b) {
  struct stat first {
  }, second{};
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
         first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

} // namespace

void refuse_outputs_over_inputs(const std::vector<JobOutput>& outputs,
                                const std::vector<std::string>& inputs) {
  for (const JobOutput& output : outputs) {
    if (output.path.empty()) continue;
    const fs::path out = where(output.path);
    for (const std::string& input : inputs) {
      if (input.empty()) continue;
      const fs::path in = where(input);
      std::string relation;
      if (same_file(output.path, input) || out == in) {
        relation = "is";
      } else if (within(out, in)) {
        relation = "lies inside";
      } else if (output.folder && within(in, out)) {
        relation = "holds";
      } else {
        continue;
      }
      throw IoError(output.flag + " '" + output.path + "' " + relation + " '" + input +
                    "', an input of this job: writing there would overwrite what the job reads; "
                    "choose another path");
    }
  }
}

} // namespace tessera::runtime
