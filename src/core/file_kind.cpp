// What a path is, in words (file_kind.hpp).
#include "tessera/core/file_kind.hpp"

#include <sys/stat.h>

namespace tessera {

std::string describe_file_kind(std::uint32_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  return "a regular file";
}

} // namespace tessera
