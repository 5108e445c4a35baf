// The one thing every CUDA stub does: report that this build has no CUDA backend.
#pragma once

#include "tessera/core/error.hpp"

#include <source_location>
#include <string>

namespace tessera::kernels::cuda {

/// Throws NotCompiled naming `kernel`, located at the stub that called it.
[[noreturn]] inline void
not_compiled(const char* kernel, std::source_location where = std::source_location::current()) {
  throw NotCompiled(std::string("CUDA kernel ") + kernel +
                        ": this build has no CUDA backend (configure with -DTESSERA_WITH_CUDA=ON)",
                    where);
}

} // namespace tessera::kernels::cuda
