// Writing files so that a reader never sees half of one and nothing but a regular file is ever
// replaced (the rules are in files.hpp), and claiming the folders outputs go in.
#include "tessera/io/files.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/file_kind.hpp"
#include "tessera/io/input_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
constexpr const char* kMarkerName = ".tessera-output";
// A file name may be 255 bytes; the temporary name adds 13 (".", ".XXXXXX", ".tmp").
constexpr std::size_t kMaxNameInTemp = 200;

std::string error_text(int error) {
  return std::strerror(error);
}

/// What a path is, looked at without following a link.
enum class Kind { Absent, Regular, CharDevice, Other };

Kind kind_of(mode_t mode) {
  if (S_ISREG(mode)) return Kind::Regular;
  if (S_ISCHR(mode)) return Kind::CharDevice;
  return Kind::Other;
}

/// A file's folder and name, from `path` as the user gave it.
struct Location {
  std::string folder;
  std::string name;
};

Location locate(const std::string& path) {
  const fs::path p(path);
  Location where{p.parent_path().string(), p.filename().string()};
  if (where.folder.empty()) where.folder = ".";
  if (where.name.empty() || where.name == "." || where.name == "..") {
    throw IoError("cannot write '" + path + "': it names a folder, not a file");
  }
  return where;
}

/// The folder of `path`, opened (links in it followed: the user chose it). Throws naming both.
int open_folder(const std::string& path, const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    throw IoError("cannot write '" + path + "': its folder '" + folder + "' " +
                  (error == ENOENT    ? std::string("does not exist")
                   : error == ENOTDIR ? std::string("is not a folder")
                                      : "cannot be opened: " + error_text(error)));
  }
  return fd;
}

/// The kind of `name` in the folder `dir_fd`; st_mode in `mode`. Throws naming `path`.
Kind target_kind(int dir_fd, const std::string& name, const std::string& path, mode_t* mode) {
  struct stat info {};
  if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Kind::Absent;
    throw IoError("cannot write '" + path + "': " + error_text(errno));
  }
  if (mode != nullptr) *mode = info.st_mode;
  return kind_of(info.st_mode);
}

[[noreturn]] void refuse_target(const std::string& path, mode_t mode) {
  throw IoError("cannot write '" + path + "': it is " + describe_file_kind(mode) +
                "; Tessera replaces only regular files and writes character devices (such as "
                "/dev/null) in place");
}

/// Six random characters for a temporary name: unique enough that O_EXCL rarely retries.
std::string random_suffix() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[6];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    // No entropy source: the pid and a counter still differ between writers; O_EXCL decides.
    static unsigned counter = 0;
    const unsigned long seed = static_cast<unsigned long>(::getpid()) * 7919u + ++counter;
    for (std::size_t i = 0; i < sizeof bytes; ++i)
      bytes[i] = static_cast<unsigned char>(seed >> (5 * i));
  }
  std::string text;
  for (const unsigned char b : bytes)
    text.push_back(kAlphabet[b % (sizeof kAlphabet - 1)]);
  return text;
}

/// Creates ".NAME.XXXXXX.tmp" exclusively in `dir_fd` and returns its descriptor; its name goes
/// to `temp_name`. O_NOFOLLOW|O_EXCL: a planted link or file is never opened, only skipped.
int create_temporary(int dir_fd, const Location& where, const std::string& path,
                     std::string& temp_name) {
  const std::string stem = where.name.substr(0, kMaxNameInTemp);
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_name = "." + stem + "." + random_suffix() + ".tmp";
    const int fd = ::openat(dir_fd, temp_name.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST) {
      const int error = errno;
      throw IoError("cannot write '" + path + "': cannot create a file in its folder '" +
                    where.folder + "': " + error_text(error));
    }
  }
  throw IoError("cannot write '" + path + "': 100 temporary names in '" + where.folder +
                "' were all taken");
}

/// Opens a character device for writing in place; O_NONBLOCK so that a FIFO swapped in since it
/// was looked at cannot hang the open (it is refused below), cleared again for the writes.
int open_device(int dir_fd, const std::string& name, const std::string& path) {
  const int fd =
      ::openat(dir_fd, name.c_str(), O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot write '" + path + "': " + error_text(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISCHR(info.st_mode)) {
    const mode_t mode = info.st_mode;
    ::close(fd);
    refuse_target(path, mode);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int error = errno;
    ::close(fd);
    throw IoError("cannot write '" + path + "': " + error_text(error));
  }
  return fd;
}

/// Writes all of `data` at the descriptor's position (or at `offset` when >= 0).
bool write_all(int fd, const char* data, std::size_t bytes, off_t offset = -1) {
  while (bytes > 0) {
    const ssize_t n = offset < 0 ? ::write(fd, data, bytes) : ::pwrite(fd, data, bytes, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;
      return false;
    }
    data += n;
    bytes -= static_cast<std::size_t>(n);
    if (offset >= 0) offset += n;
  }
  return true;
}

} // namespace

// ---- AtomicFile --------------------------------------------------------------------------------

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const Location where = locate(path_);
  name_ = where.name;
  dir_fd_ = open_folder(path_, where.folder);
  try {
    mode_t mode = 0;
    switch (target_kind(dir_fd_, name_, path_, &mode)) {
    case Kind::Absent:
    case Kind::Regular:
      fd_ = create_temporary(dir_fd_, where, path_, temp_name_);
      break;
    case Kind::CharDevice:
      fd_ = open_device(dir_fd_, name_, path_);
      break;
    case Kind::Other:
      refuse_target(path_, mode);
    }
  } catch (...) {
    ::close(dir_fd_);
    dir_fd_ = -1;
    throw;
  }
  buffer_.reserve(kBufferBytes);
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (dir_fd_ >= 0) {
    if (!temp_name_.empty()) ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    ::close(dir_fd_);
  }
  dir_fd_ = -1;
}

void AtomicFile::fail(const std::string& problem) {
  discard();
  throw IoError("cannot write '" + path_ + "': " + problem);
}

void AtomicFile::flush_buffer() {
  if (buffer_.empty()) return;
  if (!write_all(fd_, buffer_.data(), buffer_.size())) fail(error_text(errno));
  buffer_.clear();
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw IoError("cannot write '" + path_ + "': the file is already closed");
  const char* at = static_cast<const char*>(data);
  if (buffer_.size() + bytes > kBufferBytes) flush_buffer();
  if (bytes >= kBufferBytes) {
    if (!write_all(fd_, at, bytes)) fail(error_text(errno));
  } else if (bytes > 0) {
    buffer_.insert(buffer_.end(), at, at + bytes);
  }
  size_ += bytes;
}

void AtomicFile::write_at(std::uint64_t offset, const void* data, std::size_t bytes) {
  if (fd_ < 0) throw IoError("cannot write '" + path_ + "': the file is already closed");
  if (offset > size_ || bytes > size_ - offset) {
    throw InvalidArgument("'" + path_ + "': write_at(" + std::to_string(offset) + ", " +
                          std::to_string(bytes) + " bytes) beyond the " + std::to_string(size_) +
                          " bytes written");
  }
  flush_buffer();
  if (!write_all(fd_, static_cast<const char*>(data), bytes, static_cast<off_t>(offset))) {
    fail(error_text(errno));
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw IoError("cannot write '" + path_ + "': the file is already closed");
  flush_buffer();
  if (temp_name_.empty()) {
    // A character device: the bytes went to it in place; there is nothing to sync or rename.
    const int result = ::close(fd_);
    fd_ = -1;
    if (result != 0) fail(error_text(errno));
    committed_ = true;
    discard();
    return;
  }
  mode_t mode = 0;
  const Kind kind = target_kind(dir_fd_, name_, path_, &mode);
  if (kind == Kind::Regular && ::fchmod(fd_, mode & 07777) != 0) fail(error_text(errno));
  if (::fsync(fd_) != 0) fail("cannot flush to disk: " + error_text(errno));
  const int result = ::close(fd_);
  fd_ = -1;
  if (result != 0) fail(error_text(errno));

  // Checked again just before the rename: only a regular file or nothing may be replaced.
  if (kind == Kind::Regular) {
    if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
      fail("cannot rename '" + temp_name_ + "' onto it: " + error_text(errno));
    }
  } else if (kind == Kind::Absent) {
    if (::renameat2(dir_fd_, temp_name_.c_str(), dir_fd_, name_.c_str(), RENAME_NOREPLACE) != 0) {
      const int error = errno;
      if (error == EEXIST) fail("a file appeared under its name while it was being written");
      // Some file systems lack RENAME_NOREPLACE; the check above is then the only one.
      if (error != EINVAL || ::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
        fail("cannot rename '" + temp_name_ + "' onto it: " + error_text(errno));
      }
    }
  } else {
    discard();
    refuse_target(path_, mode);
  }
  temp_name_.clear(); // renamed: nothing left to remove
  committed_ = true;
  // The rename is durable only once the folder is flushed; some file systems cannot (EINVAL).
  const bool synced = ::fsync(dir_fd_) == 0 || errno == EINVAL;
  const int error = errno;
  discard();
  if (!synced) {
    throw IoError("wrote '" + path_ +
                  "' but cannot flush its folder to disk: " + error_text(error));
  }
}

// ---- whole files -------------------------------------------------------------------------------

void write_file_atomically(const std::string& path, const void* head, std::size_t head_bytes,
                           const void* payload, std::size_t payload_bytes) {
  AtomicFile file(path);
  file.write(head, head_bytes);
  file.write(payload, payload_bytes);
  file.commit();
}

void write_text_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, nullptr, 0, text.data(), text.size());
}

void check_output_file(const std::string& path) {
  const Location where = locate(path);
  const int dir_fd = open_folder(path, where.folder);
  try {
    mode_t mode = 0;
    std::string temp_name;
    switch (target_kind(dir_fd, where.name, path, &mode)) {
    case Kind::Absent:
    case Kind::Regular:
      // Creating a file is the one check that also catches read-only mounts and ACLs.
      ::close(create_temporary(dir_fd, where, path, temp_name));
      ::unlinkat(dir_fd, temp_name.c_str(), 0);
      break;
    case Kind::CharDevice:
      ::close(open_device(dir_fd, where.name, path));
      break;
    case Kind::Other:
      refuse_target(path, mode);
    }
  } catch (...) {
    ::close(dir_fd);
    throw;
  }
  ::close(dir_fd);
}

// ---- output folders ----------------------------------------------------------------------------

namespace {

/// `dir` without trailing slashes ("out/" would make lstat follow a link named out).
std::string strip_slashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  return dir;
}

void check_kind_name(const std::string& kind) {
  if (kind.empty() || kind.find('\n') != std::string::npos) {
    throw InvalidArgument("output folder kind '" + kind + "' must be one non-empty line");
  }
}

/// Refuses "" and anything that resolves to "/": an output never takes over the root folder.
void refuse_root(const std::string& dir, const std::string& kind) {
  if (dir.empty()) throw IoError("the " + kind + " output folder is an empty path");
  std::error_code error;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(dir, error), error);
  if (!error && resolved == resolved.root_path()) {
    throw IoError("refusing to write a " + kind + " into '" + dir +
                  "' (the root folder): choose a new folder");
  }
}

/// The first entry of the folder other than the marker, or "" when there is none.
std::string first_foreign_entry(int dir_fd) {
  const int copy = ::dup(dir_fd);
  if (copy < 0) return "";
  DIR* listing = ::fdopendir(copy);
  if (listing == nullptr) {
    ::close(copy);
    return "";
  }
  ::rewinddir(listing);
  std::string found;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name != "." && name != ".." && name != kMarkerName) {
      found = name;
      break;
    }
  }
  ::closedir(listing);
  return found;
}

/// The marker's content for `kind`, and the kind a marker's content names ("" when unreadable).
std::string marker_text(const std::string& kind) {
  return json_text(nlohmann::ordered_json{{"format", "tessera-output"}, {"kind", kind}});
}
std::string marker_kind(const std::string& text) {
  const auto parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() ||
      parsed.value("format", "") != "tessera-output")
    return "";
  const auto kind = parsed.find("kind");
  return kind != parsed.end() && kind->is_string() ? kind->get<std::string>() : "";
}

std::string read_all(int fd) {
  std::string text;
  char chunk[4096];
  for (off_t at = 0;; at += static_cast<off_t>(sizeof chunk)) {
    const ssize_t n = ::pread(fd, chunk, sizeof chunk, at);
    if (n <= 0 || text.size() > 65536) break;
    text.append(chunk, static_cast<std::size_t>(n));
  }
  return text;
}

/// The verdict on a folder with a marker holding `text` (empty: a claim still being made, or one
/// cut short) and `foreign` the first other entry. Throws IoError naming `dir` when refused.
void judge(const std::string& dir, const std::string& kind, bool replace, const std::string& text,
           const std::string& foreign) {
  if (text.empty()) {
    if (foreign.empty()) return;
    throw IoError("cannot write a " + kind + " into '" + dir + "': it is not empty (it holds '" +
                  foreign + "') and is not a Tessera output: choose a new or empty folder");
  }
  const std::string found = marker_kind(text);
  if (found.empty()) {
    throw IoError("cannot write a " + kind + " into '" + dir + "': its " + kMarkerName +
                  " is not a Tessera output marker: choose a new or empty folder");
  }
  if (found != kind) {
    throw IoError("cannot write a " + kind + " into '" + dir + "': it holds a Tessera " + found +
                  ", not a " + kind + ": choose a new or empty folder");
  }
  if (!replace) {
    throw OutputExists("'" + dir + "' already holds a " + kind +
                       " (possibly an interrupted one), and replacing it was not asked for");
  }
}

/// Refuses a marker that is not a regular file (a link is never followed). True when present.
bool marker_present(int dir_fd, const std::string& dir) {
  struct stat info {};
  if (::fstatat(dir_fd, kMarkerName, &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return false;
    throw IoError("cannot read '" + dir + "/" + kMarkerName + "': " + error_text(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    throw IoError("'" + dir + "/" + kMarkerName + "' is " + describe_file_kind(info.st_mode) +
                  ", not a Tessera output marker: remove it or choose another folder");
  }
  return true;
}

/// The message for a folder that cannot be looked at: ENOTDIR says a parent is a file.
[[noreturn]] void refuse_unreadable(const std::string& dir, const std::string& kind, int error) {
  throw IoError(
      "cannot write a " + kind + " into '" + dir + "': " +
      (error == ENOTDIR ? std::string("a part of its path is not a folder") : error_text(error)));
}

/// The folder itself, never through a link. Throws naming `dir` when it is not a folder.
int open_output_folder(const std::string& dir, const std::string& folder, const std::string& kind) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  const int error = errno;
  struct stat info {};
  if (::lstat(folder.c_str(), &info) == 0 && !S_ISDIR(info.st_mode)) {
    throw IoError("cannot write a " + kind + " into '" + dir + "': it is " +
                  describe_file_kind(info.st_mode) + ", not a folder");
  }
  refuse_unreadable(dir, kind, error);
}

/// The checks every output folder passes first ("/" and bad kinds refused); the folder without
/// trailing slashes, and whether it exists (looked at without following a link).
std::pair<std::string, bool> look_at_output_folder(const std::string& dir,
                                                   const std::string& kind) {
  check_kind_name(kind);
  refuse_root(dir, kind);
  std::string folder = strip_slashes(dir);
  struct stat info {};
  if (::lstat(folder.c_str(), &info) == 0) return {std::move(folder), true};
  if (errno != ENOENT) refuse_unreadable(dir, kind, errno);
  return {std::move(folder), false};
}

[[noreturn]] void refuse_busy(const std::string& dir) {
  throw IoError("another process is writing '" + dir + "' (it holds " + kMarkerName +
                " locked): wait for it or choose another folder");
}

} // namespace

OutputFolder::OutputFolder(const std::string& dir, const std::string& kind, bool replace)
    : path_(dir) {
  const auto [folder, exists] = look_at_output_folder(dir, kind);
  if (!exists) {
    std::error_code error;
    const fs::path parent = fs::path(folder).parent_path();
    if (!parent.empty()) fs::create_directories(parent, error);
    if (error || (::mkdir(folder.c_str(), 0777) != 0 && errno != EEXIST)) {
      throw IoError("cannot create the " + kind + " folder '" + dir +
                    "': " + (error ? error.message() : error_text(errno)));
    }
  }
  const int dir_fd = open_output_folder(dir, folder, kind);
  try {
    const bool existed = marker_present(dir_fd, dir);
    if (!existed) judge(dir, kind, replace, "", first_foreign_entry(dir_fd));
    marker_fd_ = ::openat(dir_fd, kMarkerName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (marker_fd_ < 0) {
      throw IoError("cannot claim '" + dir + "': cannot open " + kMarkerName + ": " +
                    error_text(errno));
    }
    struct stat info {};
    if (::fstat(marker_fd_, &info) != 0 || !S_ISREG(info.st_mode)) marker_present(dir_fd, dir);
    if (::flock(marker_fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) refuse_busy(dir);
      throw IoError("cannot lock '" + dir + "/" + kMarkerName + "': " + error_text(errno));
    }
    // Decided again under the lock: another writer may have claimed the folder meanwhile.
    const std::string text = read_all(marker_fd_);
    try {
      judge(dir, kind, replace, text, text.empty() ? first_foreign_entry(dir_fd) : "");
    } catch (...) {
      if (!existed && text.empty()) ::unlinkat(dir_fd, kMarkerName, 0);
      throw;
    }
    const std::string mine = marker_text(kind);
    if (text != mine &&
        (::ftruncate(marker_fd_, 0) != 0 || !write_all(marker_fd_, mine.data(), mine.size(), 0) ||
         ::fsync(marker_fd_) != 0 || ::fsync(dir_fd) != 0)) {
      throw IoError("cannot write '" + dir + "/" + kMarkerName + "': " + error_text(errno));
    }
  } catch (...) {
    if (marker_fd_ >= 0) ::close(marker_fd_);
    marker_fd_ = -1;
    ::close(dir_fd);
    throw;
  }
  ::close(dir_fd);
}

OutputFolder::~OutputFolder() {
  if (marker_fd_ >= 0) ::close(marker_fd_); // closing the last descriptor drops the flock
}

void check_output_folder(const std::string& dir, const std::string& kind, bool replace) {
  const auto [folder, exists] = look_at_output_folder(dir, kind);
  struct stat info {};
  if (!exists) {
    // Absent: it will be created, so its nearest existing parent must be a writable folder.
    fs::path parent = fs::absolute(folder).parent_path();
    while (::lstat(parent.c_str(), &info) != 0 && parent != parent.root_path())
      parent = parent.parent_path();
    if (::stat(parent.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      throw IoError("cannot create the " + kind + " folder '" + dir + "': '" + parent.string() +
                    "' is not a folder");
    }
    if (::access(parent.c_str(), W_OK | X_OK) != 0) {
      throw IoError("cannot create the " + kind + " folder '" + dir + "' in '" + parent.string() +
                    "': " + error_text(errno));
    }
    return;
  }
  const int dir_fd = open_output_folder(dir, folder, kind);
  try {
    if (::faccessat(dir_fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
      throw IoError("cannot write a " + kind + " into '" + dir + "': " + error_text(errno));
    }
    std::string text;
    if (marker_present(dir_fd, dir)) {
      const int marker = ::openat(dir_fd, kMarkerName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (marker < 0) {
        throw IoError("cannot read '" + dir + "/" + kMarkerName + "': " + error_text(errno));
      }
      // A shared lock conflicts with a writer's exclusive one: the probe finds a live writer.
      const bool busy = ::flock(marker, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
      text = read_all(marker);
      ::close(marker);
      if (busy) refuse_busy(dir);
    }
    judge(dir, kind, replace, text, text.empty() ? first_foreign_entry(dir_fd) : "");
  } catch (...) {
    ::close(dir_fd);
    throw;
  }
  ::close(dir_fd);
}

// ---- JSON and plain folder operations ----------------------------------------------------------

std::string json_text(const nlohmann::json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string json_text(const nlohmann::ordered_json& value) {
  return value.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

void create_folder(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) throw IoError("cannot create folder '" + path + "': " + error.message());
}

void remove_file(const std::string& path) {
  std::error_code error;
  std::filesystem::remove(path, error);
  if (error) throw IoError("cannot remove '" + path + "': " + error.message());
}

} // namespace tessera::io
