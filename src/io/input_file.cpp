// Opening input files: regular files only, decided before anything is read.
#include "tessera/io/input_file.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/file_kind.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::io {

int open_input_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever. A socket
  // cannot be opened at all (ENXIO); lstat-free, so a link to a dataset is followed.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    struct stat info {};
    if (error == ENXIO && ::stat(path.c_str(), &info) == 0) {
      throw IoError("cannot read '" + path + "': it is " + describe_file_kind(info.st_mode) +
                    ", not a regular file");
    }
    throw IoError("cannot open '" + path + "': " + std::strerror(error));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    throw IoError("cannot read '" + path + "': " + std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw IoError("cannot read '" + path + "': it is " + describe_file_kind(info.st_mode) +
                  ", not a regular file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int error = errno;
    ::close(fd);
    throw IoError("cannot read '" + path + "': " + std::strerror(error));
  }
  return fd;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int InputFile::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

} // namespace tessera::io
