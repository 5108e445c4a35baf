// The one public exception hierarchy: every error says what, where in the input, and where in
// the code.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace tessera {

/// Base of every exception Tessera throws. what() is the user-facing message; file(), line()
/// and function() locate the throw in Tessera's sources for bug reports.
class Error : public std::runtime_error {
public:
  /// `where` defaults to the throw site; pass it on when throwing for a caller's location.
  explicit Error(const std::string& message,
                 std::source_location where = std::source_location::current())
      : std::runtime_error(message), where_(where) {}

  /// Source file, line and function of the throw (valid for the life of the program).
  const char* file() const noexcept { return where_.file_name(); }
  unsigned line() const noexcept { return where_.line(); }
  const char* function() const noexcept { return where_.function_name(); }

private:
  std::source_location where_;
};

#define TESSERA_DEFINE_ERROR(Name)                                                                 \
  class Name : public Error {                                                                      \
  public:                                                                                          \
    using Error::Error;                                                                            \
  }

/// A caller passed a value outside the documented domain.
TESSERA_DEFINE_ERROR(InvalidArgument);
/// Two operands have shapes that do not fit; the message quotes both.
TESSERA_DEFINE_ERROR(DimensionMismatch);
/// A file could not be opened, read or written.
TESSERA_DEFINE_ERROR(IoError);
/// A file was read but its contents are not what its format promises.
TESSERA_DEFINE_ERROR(FormatError);
/// A CUDA runtime call failed.
TESSERA_DEFINE_ERROR(CudaError);
/// A cuSPARSE call failed.
TESSERA_DEFINE_ERROR(CusparseError);
/// A cuBLAS call failed.
TESSERA_DEFINE_ERROR(CublasError);
/// An NCCL call failed.
TESSERA_DEFINE_ERROR(NcclError);
/// An MPI call failed.
TESSERA_DEFINE_ERROR(MpiError);
/// A rank waited for a peer longer than the watchdog allows (comm::PeerWatch); the message names
/// the rank waited for and the step.
TESSERA_DEFINE_ERROR(PeerTimeout);
/// METIS returned an error or the graph does not fit its index type.
TESSERA_DEFINE_ERROR(MetisError);
/// Another partitioner failed: PT-Scotch (the ParMETIS API) or Zoltan; the message names the call
/// and its error code.
TESSERA_DEFINE_ERROR(PartitionerError);
/// The feature asked for was not compiled into this build (for example CUDA in a CPU-only build).
TESSERA_DEFINE_ERROR(NotCompiled);

#undef TESSERA_DEFINE_ERROR

/// An output (a file, a store, a checkpoint) is there already and replacing it was not asked for;
/// the message names it. Programs add how to ask (runtime::error_text).
class OutputExists : public IoError {
public:
  using IoError::IoError;
};

} // namespace tessera
