// The array file of partition stores and native datasets: a 64-byte little-endian header (magic,
// version, dtype, shape, payload size, CRC-32) followed by the raw payload; written via temp file +
// rename.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera::io {

/// Element type codes stored in the header.
enum class StoreDType : std::uint32_t { I32 = 1, I64 = 2, F32 = 3, U8 = 4 };

/// The code of T (std::int32_t, std::int64_t, float, std::uint8_t).
template <typename T> constexpr StoreDType dtype_of();
template <> constexpr StoreDType dtype_of<std::int32_t>() {
  return StoreDType::I32;
}
template <> constexpr StoreDType dtype_of<std::int64_t>() {
  return StoreDType::I64;
}
template <> constexpr StoreDType dtype_of<float>() {
  return StoreDType::F32;
}
template <> constexpr StoreDType dtype_of<std::uint8_t>() {
  return StoreDType::U8;
}

inline constexpr std::size_t kArrayHeaderBytes = 64;
/// Version of the array file header; a file of another version is refused.
inline constexpr std::uint32_t kArrayFileVersion = 1;

/// CRC-32 (zlib) of `bytes` bytes continuing from `crc` (start with 0).
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes) noexcept;

/// "0a1b2c3d": the manifest's spelling of a CRC.
std::string crc_hex(std::uint32_t crc);

/// Writes a 1-D (cols < 0) or 2-D [rows, cols] array of `data.size()` elements to `path` via
/// `path.tmp` and a rename. Returns the payload CRC. Throws IoError naming the file.
template <typename T>
std::uint32_t write_array(const std::string& path, std::span<const T> data, std::int64_t rows,
                          std::int64_t cols = -1);

/// An array read back: its shape (cols = -1 for 1-D), payload CRC and elements.
template <typename T> struct StoredArray {
  std::int64_t rows = 0;
  std::int64_t cols = -1;
  std::uint32_t crc = 0;
  std::vector<T> data;
};

/// Reads `path`, checking magic, format version, dtype (T), ndim (2 when `two_dim`), that
/// the shape matches `expected_rows` / `expected_cols` (each ignored when negative), that the
/// payload is complete, and its CRC. Throws IoError (missing/unreadable) or FormatError, each
/// naming the file and the problem.
template <typename T>
StoredArray<T> read_array(const std::string& path, bool two_dim, std::int64_t expected_rows = -1,
                          std::int64_t expected_cols = -1);

/// Throws InvalidArgument "<source>: rows [first, last) are outside its rows [0, rows)" (or "are
/// not a range" when first > last) unless 0 <= first <= last <= rows.
void check_row_range(const std::string& source, std::int64_t first, std::int64_t last,
                     std::int64_t rows);

/// An array file opened to read some of its rows: what one rank of a job reads of a file that
/// holds the rows of all ranks. The constructor checks the header as read_array does (magic,
/// version, dtype T, ndim, the shape against `expected_rows` / `expected_cols`, a file long enough
/// for the whole payload); read_rows then reads only the rows asked for, at their offset (pread).
///
/// The header's CRC covers the whole payload, so it is checked only by a read of every row at
/// once; a read of fewer rows cannot check it, and a flipped bit inside them goes unnoticed unless
/// a check of the values (ids in range, finite floats) catches it. Reads may run concurrently.
template <typename T> class ArrayReader {
public:
  /// Opens `path` and checks its header. Throws IoError (missing/unreadable) or FormatError,
  /// each naming the file and the problem.
  ArrayReader(std::string path, bool two_dim, std::int64_t expected_rows = -1,
              std::int64_t expected_cols = -1);
  /// Closes the file. Never throws.
  ~ArrayReader();
  ArrayReader(const ArrayReader&) = delete;
  ArrayReader& operator=(const ArrayReader&) = delete;

  const std::string& path() const noexcept { return path_; }
  /// The shape in the header: rows (the element count of a 1-D array) and columns (-1 for 1-D).
  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  /// The payload CRC the header records.
  std::uint32_t crc() const noexcept { return crc_; }

  /// Reads rows [first, last) into `out` ([last - first, cols] elements, [last - first] for
  /// 1-D). Throws InvalidArgument (check_row_range, or `out` of another size), FormatError when
  /// the file ends early or, for a read of every row, the CRC differs, IoError on a read error;
  /// each names the file.
  void read_rows(std::int64_t first, std::int64_t last, std::span<T> out) const;
  /// The same into a new vector.
  std::vector<T> read_rows(std::int64_t first, std::int64_t last) const;

private:
  void check_header(bool two_dim, std::int64_t expected_rows, std::int64_t expected_cols);

  std::string path_;
  int fd_ = -1;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = -1;
  std::uint32_t crc_ = 0;
};

} // namespace tessera::io
