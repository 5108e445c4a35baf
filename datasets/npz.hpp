// Reading and writing .npz archives: zip files (stored or deflated) whose members are .npy arrays.
#pragma once

#include "tessera/io/files.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera::datasets::detail {

/// The element types the reader converts from (numpy descr in parentheses).
enum class DType { Int8, UInt8, Bool, Int32, Int64, Float32, Float64 };

/// The numpy descr of `dtype` ("<i8", "|b1", ...).
const char* descr_of(DType dtype) noexcept;

/// The header of one .npy member.
struct NpyInfo {
  std::string descr; ///< as written, e.g. "<f4" or "<U7"
  /// Set when descr is one of the supported numeric types.
  std::optional<DType> dtype;
  std::vector<std::int64_t> shape; ///< empty for a 0-d array
  bool fortran_order = false;
  /// Bytes before the array data (magic, version, length and the header dict).
  std::uint64_t header_bytes = 0;
  /// Number of elements (1 for a 0-d array); a header whose shape's product overflows is refused
  /// when it is read (checked_product), so this never wraps.
  std::int64_t count = 1;

  /// Number of elements (1 for a 0-d array).
  std::int64_t size() const noexcept { return count; }
  /// Whether the elements are integers (booleans are not: a mask is not a list of ids).
  bool holds_integers() const noexcept;
  /// "(2708, 1433)" for messages.
  std::string shape_string() const;
};

/// An array read from an npz member and converted to T.
template <typename T> struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<T> data; ///< C order
};

/// Reads arrays from an .npz file: parses the zip central directory once, then reads members on
/// demand. Members may be stored or deflated, arrays in C or Fortran order (always returned in C
/// order, as numpy returns them); zip64 archives are refused. Archives that numpy would read
/// otherwise than a first-match reader are refused when opened: two members of one array name
/// (numpy takes the last), and a member whose local header names another file than the central
/// directory (numpy's zipfile refuses it). Errors name the file and the member: IoError when the
/// file cannot be read or is not a regular file (a FIFO is refused before it is opened for
/// reading), FormatError for a truncated archive, a bad .npy header (a shape whose element count
/// overflows among them), an unsupported dtype, or values that do not fit the requested type.
class NpzReader {
public:
  explicit NpzReader(std::string path);
  ~NpzReader();
  NpzReader(const NpzReader&) = delete;
  NpzReader& operator=(const NpzReader&) = delete;

  const std::string& path() const noexcept { return path_; }
  /// Array names (member names without ".npy"), in archive order.
  std::vector<std::string> keys() const;
  bool contains(const std::string& key) const noexcept;
  /// The header of `key` (reads only the header).
  NpyInfo info(const std::string& key) const;
  /// info(key), checked as a read checks it before sizing anything by it: a numeric dtype, and
  /// exactly the payload bytes the shape needs. Throws FormatError naming the array.
  NpyInfo readable_info(const std::string& key) const;

  /// Reads `key` converted to T (std::int64_t, std::int32_t, std::uint8_t, float or double).
  template <typename T> NpyArray<T> read(const std::string& key) const;
  /// Reads `key` into `out`, which must hold exactly info(key).size() elements.
  template <typename T> void read_into(const std::string& key, std::span<T> out) const;

  /// Throws FormatError "path: array 'key': message".
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

private:
  struct Member {
    std::string name;
    std::uint16_t method = 0;
    std::uint32_t crc = 0;
    std::uint64_t compressed_size = 0;
    std::uint64_t uncompressed_size = 0;
    std::uint64_t local_header_offset = 0;
  };
  class MemberStream;

  /// Reads out.size() values of `dtype` from `stream`, converting each to T (failing on values T
  /// cannot hold).
  template <typename T>
  void read_converted(MemberStream& stream, DType dtype, std::span<T> out,
                      const std::string& key) const;

  void read_central_directory();
  /// Refuses two members of one array name, a local header naming another file, and a member
  /// whose bytes run into the next member or into the central directory at `cd_offset`.
  void check_members(std::uint64_t cd_offset) const;
  const Member& member(const std::string& key) const;
  void read_exact(std::uint64_t offset, void* out, std::size_t bytes) const;

  std::string path_;
  int fd_ = -1;
  std::uint64_t file_size_ = 0;
  std::vector<Member> members_;
};

/// The .npy 1.0 header of an array of `dtype` and `shape` (C order), padded so the data that
/// follows it starts at a multiple of 64 bytes.
std::string npy_header(DType dtype, const std::vector<std::int64_t>& shape);
/// Throws InvalidArgument naming `key` unless `shape` holds exactly `count` elements.
void check_npy_shape(const std::string& key, const std::vector<std::int64_t>& shape,
                     std::int64_t count);

/// Writes an uncompressed .npz (npy 1.0 members, little-endian, C order) that numpy's np.load
/// reads. The archive goes through an io::AtomicFile: a temporary file created exclusively beside
/// `path` (never following a planted link) and renamed onto it by commit(); without commit() the
/// temporary file is removed. Archives and members are limited to 4 GiB (no zip64).
class NpzWriter {
public:
  explicit NpzWriter(std::string path);
  ~NpzWriter();
  NpzWriter(const NpzWriter&) = delete;
  NpzWriter& operator=(const NpzWriter&) = delete;

  /// Adds array `key` of element type Stored and `shape`, converting each element of `values`
  /// (Stored = bool: booleans from bytes that are 0 or 1).
  template <typename Stored, typename Source>
  void add(const std::string& key, const std::vector<std::int64_t>& shape,
           std::span<const Source> values);

  /// Finishes the archive and moves it onto `path`. Throws IoError on failure.
  void commit();

private:
  struct Entry {
    std::string name;
    std::uint32_t crc = 0;
    std::uint64_t size = 0;
    std::uint64_t offset = 0;
  };

  void begin_member(const std::string& key, DType dtype, const std::vector<std::int64_t>& shape,
                    std::int64_t count);
  void write_data(const void* data, std::size_t bytes);
  void end_member();
  void write_raw(const void* data, std::size_t bytes);
  [[noreturn]] void fail_write(const std::string& what) const;

  std::string path_;
  io::AtomicFile file_;
  std::vector<Entry> entries_;
};

template <typename T> constexpr DType dtype_of() noexcept;
template <> constexpr DType dtype_of<bool>() noexcept {
  return DType::Bool;
}
template <> constexpr DType dtype_of<std::int8_t>() noexcept {
  return DType::Int8;
}
template <> constexpr DType dtype_of<std::uint8_t>() noexcept {
  return DType::UInt8;
}
template <> constexpr DType dtype_of<std::int32_t>() noexcept {
  return DType::Int32;
}
template <> constexpr DType dtype_of<std::int64_t>() noexcept {
  return DType::Int64;
}
template <> constexpr DType dtype_of<float>() noexcept {
  return DType::Float32;
}
template <> constexpr DType dtype_of<double>() noexcept {
  return DType::Float64;
}

template <typename Stored, typename Source>
void NpzWriter::add(const std::string& key, const std::vector<std::int64_t>& shape,
                    std::span<const Source> values) {
  // Booleans (|b1) are written from bytes of 0 and 1.
  static_assert(!std::is_same_v<Stored, bool> || std::is_same_v<Source, std::uint8_t>);
  begin_member(key, dtype_of<Stored>(), shape, static_cast<std::int64_t>(values.size()));
  if constexpr (std::is_same_v<Stored, Source> || std::is_same_v<Stored, bool>) {
    write_data(values.data(), values.size_bytes());
  } else {
    constexpr std::size_t kBlock = 1 << 14;
    std::vector<Stored> block(kBlock);
    for (std::size_t begin = 0; begin < values.size(); begin += kBlock) {
      const std::size_t n = std::min(kBlock, values.size() - begin);
      for (std::size_t i = 0; i < n; ++i)
        block[i] = static_cast<Stored>(values[begin + i]);
      write_data(block.data(), n * sizeof(Stored));
    }
  }
  end_member();
}

} // namespace tessera::datasets::detail
