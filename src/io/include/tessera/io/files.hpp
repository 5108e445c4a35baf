// Writing files so that a reader never sees half of one, and the folders they go in: the one
// place every file Tessera writes (array files, manifests, reports, checkpoints) goes through.
//
// Safe-write rules (AtomicFile, write_file_atomically, write_text_file, check_output_file), for a
// target `DIR/NAME`:
//  - The target is looked at without following links. When it is absent or a regular file, the
//    bytes go to a new temporary file "DIR/.NAME.XXXXXX.tmp" created exclusively (O_CREAT|O_EXCL|
//    O_NOFOLLOW, a random unique name in the target's own folder), are flushed to disk (fsync),
//    and the temporary file is then renamed onto NAME and the folder flushed. A reader sees the
//    old file or the new one, never half of one. A replaced file keeps its permission bits.
//  - When the target is a character device (/dev/null, /dev/full, a terminal) it is written in
//    place, without a temporary file or a rename, so the device node is never replaced; a device
//    that refuses the bytes (/dev/full: ENOSPC) fails naming the file.
//  - Anything else (a symbolic link, a folder, a FIFO, a socket, a block device) is refused with
//    an IoError naming the path and what it is. Links are never followed: not the target, not a
//    planted "NAME.tmp", which is left alone.
//  - On any failure the temporary file is removed and the target is left as it was.
//  - The kind of the target is checked when the write starts and again just before the rename;
//    a target that appears in between is not replaced (RENAME_NOREPLACE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tessera::io {

/// A file written under a temporary name and put in place whole by commit(), following the
/// safe-write rules above. Not thread-safe; one writer per object.
///
///   AtomicFile file(path);        // throws IoError when `path` cannot be written (rules above)
///   file.write(bytes, n); ...     // appended in order, buffered
///   file.write_at(14, crc, 4);    // patches bytes already written (a header filled in last)
///   file.commit();                // fsync + rename; without it the destructor removes the temp
class AtomicFile {
public:
  /// Checks the target and opens the temporary file (or the character device). Throws IoError
  /// naming `path` when its folder is missing or unwritable or the target is not writable.
  explicit AtomicFile(std::string path);
  /// Removes the temporary file unless commit() succeeded. Never throws.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Appends `bytes` bytes of `data`. Throws IoError naming the target (e.g. ENOSPC).
  void write(const void* data, std::size_t bytes);
  /// Overwrites `bytes` bytes at `offset`, which must lie within what was written so far.
  /// Throws InvalidArgument beyond that, IoError when the write fails.
  void write_at(std::uint64_t offset, const void* data, std::size_t bytes);
  /// Flushes, fsyncs and renames the temporary file onto the target (or, for a character device,
  /// just flushes). Throws IoError naming the target; the target is then untouched. Call once.
  void commit();

  /// The target path given to the constructor.
  const std::string& path() const noexcept { return path_; }
  /// Bytes written so far: the offset of the next write().
  std::uint64_t size() const noexcept { return size_; }

private:
  void flush_buffer();
  void discard() noexcept;
  [[noreturn]] void fail(const std::string& problem);

  std::string path_;
  std::string name_;      // the target's last path component
  std::string temp_name_; // the temporary file's name in the folder; empty when in place
  int dir_fd_ = -1;       // the target's folder: every later step is relative to it
  int fd_ = -1;
  bool committed_ = false;
  std::uint64_t size_ = 0;
  std::vector<char> buffer_;
};

/// Writes `head_bytes` of `head` then `payload_bytes` of `payload` to `path` by the safe-write
/// rules above (an AtomicFile). Throws IoError naming the file and the reason.
void write_file_atomically(const std::string& path, const void* head, std::size_t head_bytes,
                           const void* payload, std::size_t payload_bytes);

/// Writes `text` to `path` as write_file_atomically does. Throws IoError naming the file.
void write_text_file(const std::string& path, const std::string& text);

/// A preflight for a file written later (a report after hours of training): throws IoError naming
/// `path` now when it could not be written by the rules above — its folder is missing, is not a
/// folder or is not writable (a file is created there and removed to find out), or the target is
/// a link, folder, FIFO, socket or block device. Creates nothing that stays.
void check_output_file(const std::string& path);

/// Claims a folder for one Tessera output of a `kind` ("partition store", "native dataset", ...)
/// for the object's lifetime. The folder is created when absent (with its parents). Refused with
/// IoError naming the folder: "/", a link or anything not a folder, a non-empty folder that is not
/// a Tessera output, a Tessera output of another kind, and an existing output of the same kind
/// unless `replace` (OutputExists: "... replacing it was not asked for"); an interrupted output
/// (marker present, content incomplete) counts as an existing one. The claim is the file
/// DIR/.tessera-output (which names the kind and stays) held under an exclusive flock until
/// destruction, so a second concurrent writer fails with "another process is writing DIR"; the
/// kernel drops the lock when the process dies, so a crash leaves no stale lock. Replacing empties
/// nothing: the caller overwrites or removes the old files inside path().
class OutputFolder {
public:
  OutputFolder(const std::string& dir, const std::string& kind, bool replace);
  /// Releases the lock (the marker stays). Never throws.
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  /// The folder, as given.
  const std::string& path() const noexcept { return path_; }

private:
  std::string path_;
  int marker_fd_ = -1;
};

/// The checks of OutputFolder without creating or locking anything: a preflight before loading or
/// computing what goes into `dir`. A missing folder passes when it could be created (its nearest
/// existing parent is a writable folder). Throws IoError naming `dir`, as OutputFolder would.
void check_output_folder(const std::string& dir, const std::string& kind, bool replace);

/// `value` as pretty JSON (2-space indent) plus a final newline: the one way Tessera writes JSON.
/// Strings that are not valid UTF-8 (a path from a non-UTF-8 file name) never throw; their bad
/// bytes become U+FFFD.
std::string json_text(const nlohmann::json& value);
std::string json_text(const nlohmann::ordered_json& value);

/// Creates `path` and its parents (nothing when they exist); remove_file removes one file
/// (nothing when absent). Each throws IoError naming the path and the reason.
void create_folder(const std::string& path);
void remove_file(const std::string& path);

} // namespace tessera::io
