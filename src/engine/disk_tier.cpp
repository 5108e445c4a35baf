// The disk tier: its folder checked (and made), its file made on first use and unlinked at once,
// whole-chunk reads and writes that name the file and the offset when they fail.
#include "disk_tier.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/file_kind.hpp"
#include "tessera/engine/chunk_manager.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

/// Checks the disk tier's folder `dir`: a writable folder, created (with its missing parents,
/// listed in `made`, outermost first) when absent, as a checkpoint folder is. Throws IoError
/// naming the folder and what it is otherwise.
void open_disk_folder(const std::string& dir, std::vector<std::string>& made) {
  const std::string where = "offload folder " + dir + ": ";
  struct stat info {};
  if (stat(dir.c_str(), &info) != 0) {
    if (errno != ENOENT) throw IoError(where + "cannot look at it (" + errno_text() + ")");
    std::vector<std::string> missing;
    for (std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
         !p.empty() && stat(p.c_str(), &info) != 0 && errno == ENOENT; p = p.parent_path()) {
      missing.push_back(p.string());
      if (p == p.parent_path()) break;
    }
    for (auto folder = missing.rbegin(); folder != missing.rend(); ++folder) {
      if (mkdir(folder->c_str(), 0777) != 0 && errno != EEXIST) {
        throw IoError(where + "cannot create '" + *folder + "' (" + errno_text() + ")");
      }
      made.push_back(*folder);
    }
    if (stat(dir.c_str(), &info) != 0) {
      throw IoError(where + "cannot look at it (" + errno_text() + ")");
    }
  }
  if (!S_ISDIR(info.st_mode)) {
    throw IoError(where + "it is " + describe_file_kind(info.st_mode) + ", not a folder");
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    throw IoError(where + "cannot write there (" + errno_text() + ")");
  }
}

} // namespace

DiskTier::DiskTier(std::string dir, int rank, std::size_t chunk, std::uint64_t fail_writes_after)
    : dir_(std::move(dir)), rank_(rank), chunk_(chunk), fail_writes_after_(fail_writes_after) {
  if (!dir_.empty()) open_disk_folder(dir_, made_);
}

DiskTier::~DiskTier() {
  if (fd_ >= 0) close(fd_);
  // The folders this tier made, deepest first; rmdir leaves one that holds anything else
  // (another rank's file, say) alone.
  for (auto made = made_.rbegin(); made != made_.rend(); ++made)
    rmdir(made->c_str());
}

void DiskTier::open_file() {
  if (fd_ >= 0 || dir_.empty()) return;
  path_ = dir_ + "/tessera-offload-rank" + std::to_string(rank_) + "-" + std::to_string(getpid()) +
          ".bin";
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) throw IoError("cannot create the offload file " + path_ + ": " + errno_text());
  // Unlinked at once: the file's blocks live while the descriptor does, and no exit path — an
  // exception, a signal, a killed rank — can leave it behind.
  unlink(path_.c_str());
}

void DiskTier::write(std::int64_t& slot, std::size_t index, const std::byte* bytes,
                     const std::string& host_budget) {
  open_file();
  if (fd_ < 0) {
    throw InvalidArgument("the host tier (host memory budget " + host_budget +
                          ") is full and there is no disk tier: give an offload folder or a "
                          "larger host memory budget");
  }
  if (slot < 0) {
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = slots_++;
    }
  }
  const off_t at = static_cast<off_t>(slot) * static_cast<off_t>(chunk_);
  std::size_t done = 0;
  while (done < chunk_) {
    std::size_t want = chunk_ - done;
    if (written_ >= fail_writes_after_)
      want = 0;
    else
      want = std::min<std::uint64_t>(want, fail_writes_after_ - written_);
    const ssize_t n = want == 0 ? -1 : pwrite(fd_, bytes + done, want, at + done);
    if (n <= 0) {
      if (n < 0 && errno == EINTR && want != 0) continue;
      const std::string why = want == 0 ? "no space left on device (injected)"
                              : n == 0  ? "short write"
                                        : errno_text();
      throw IoError("offload file " + path_ + ": writing chunk " + std::to_string(index) + " (" +
                    format_bytes(chunk_) + ") at offset " +
                    std::to_string(at + static_cast<off_t>(done)) + " failed after " +
                    std::to_string(done) + " bytes: " + why);
    }
    done += static_cast<std::size_t>(n);
    written_ += static_cast<std::uint64_t>(n);
  }
}

void DiskTier::read(std::int64_t slot, std::size_t index, std::byte* bytes) {
  const off_t at = static_cast<off_t>(slot) * static_cast<off_t>(chunk_);
  std::size_t done = 0;
  while (done < chunk_) {
    const ssize_t n = pread(fd_, bytes + done, chunk_ - done, at + done);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      throw IoError("offload file " + path_ + ": reading chunk " + std::to_string(index) +
                    " at offset " + std::to_string(at) +
                    " failed: " + (n == 0 ? std::string("unexpected end of file") : errno_text()));
    }
    done += static_cast<std::size_t>(n);
  }
}

void DiskTier::release(std::int64_t slot) {
  if (slot >= 0) free_.push_back(slot);
}

} // namespace tessera
