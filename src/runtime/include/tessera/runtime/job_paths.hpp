// What a job reads and what it writes, kept apart: an output flag that names one of the job's
// inputs (--report naming the dataset's file, --out inside the store it reads) is refused before
// anything is read or written, so no input is overwritten by its own job.
#pragma once

#include <string>
#include <vector>

namespace tessera::runtime {

/// An output of a job: the flag that names it, its path, and whether it is a folder.
struct JobOutput {
  std::string flag; ///< "--report", "--checkpoint-dir", ...
  std::string path; ///< empty: not given (skipped)
  bool folder = false;
};

/// Throws IoError naming the flag and the input when an output is one of `inputs` (files and
/// folders the job reads; the same file under another name or a hard link counts), lies inside
/// an input folder, or (a folder output) holds an input. Paths that do not exist yet are compared
/// by where they would be. Inputs or outputs given empty are skipped.
void refuse_outputs_over_inputs(const std::vector<JobOutput>& outputs,
                                const std::vector<std::string>& inputs);

} // namespace tessera::runtime
