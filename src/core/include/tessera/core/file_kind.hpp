// What a path is, in words, for the messages of every layer that refuses a path of the wrong kind.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

/// "a FIFO (named pipe)", "a folder", "a character device", "a symbolic link", ... for
/// messages; `mode` is st_mode (a mode_t).
std::string describe_file_kind(std::uint32_t mode);

} // namespace tessera
