// Opening a file to read without ever blocking on it: every input Tessera reads (datasets,
// stores, checkpoints, side files) is a regular file, checked before a byte is read, so a FIFO or
// a device named as an input is refused instead of hanging the job or reading an endless stream.
#pragma once

#include <string>
#include <sys/types.h>

namespace tessera::io {

/// Opens `path` for reading and returns the descriptor (the caller closes it). The open itself
/// cannot block (O_NONBLOCK, which is cleared again), and anything but a regular file is refused
/// before it is read: IoError "cannot read 'PATH': it is a FIFO (named pipe), not a regular file"
/// (a folder, a device, a socket alike), or naming the reason the open failed. Links are
/// followed: a dataset may be a link to the file.
int open_input_file(const std::string& path);

/// An open_input_file descriptor closed on destruction.
class InputFile {
public:
  explicit InputFile(const std::string& path) : fd_(open_input_file(path)) {}
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const noexcept { return fd_; }
  /// Hands the descriptor over (the caller closes it); this object then closes nothing.
  int release() noexcept;

private:
  int fd_ = -1;
};

} // namespace tessera::io
