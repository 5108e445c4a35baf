// Reading and writing array files: the binary format of the partition store and native datasets.
//
// Array file format (version 1), all integers little-endian:
//
//   offset  size  field
//        0     4  magic "TSRA"
//        4     4  u32 format version (kArrayFileVersion)
//        8     4  u32 dtype code: 1 = int32, 2 = int64, 3 = float32, 4 = uint8
//       12     4  u32 ndim: 1 or 2
//       16     8  u64 shape[0]: rows (the element count of a 1-D array)
//       24     8  u64 shape[1]: columns of a 2-D array, 1 for a 1-D array
//       32     8  u64 payload byte count = shape[0] * shape[1] * element size
//       40     4  u32 CRC-32 (zlib crc32) of the payload
//       44    20  zero padding
//       64     -  payload: the elements, row-major, little-endian
//
// A file is written whole under a temporary name and renamed onto its own (files.hpp), so a
// reader never sees a half-written file under its final name.
//
// Row i of an [R, C] array starts at byte 64 + i * C * element size, so ArrayReader reads any rows
// without the others. The one CRC covers the whole payload, so only a whole read checks it. A CRC
// per fixed-size block (a table after the payload) would let range reads check their blocks too;
// it would take a format version 2 and is not done: range readers check the values they read (ids
// in range, finite floats), and load_dataset of the same files still checks every CRC.
#include "tessera/io/array_file.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/sizes.hpp"
#include "tessera/io/files.hpp"
#include "tessera/io/input_file.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace tessera::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the partition store writes payloads in host order, which must be little-endian");

constexpr char kMagic[4] = {'T', 'S', 'R', 'A'};

const char* dtype_name(std::uint32_t code) {
  switch (code) {
  case 1:
    return "int32";
  case 2:
    return "int64";
  case 3:
    return "float32";
  case 4:
    return "uint8";
  default:
    return "unknown";
  }
}

void put32(unsigned char* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t get32(const unsigned char* in) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | in[i];
  return v;
}
std::uint64_t get64(const unsigned char* in) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | in[i];
  return v;
}

/// "[rows, cols]" or "[rows]" for messages.
std::string shape_text(bool two_dim, const std::string& rows, const std::string& cols) {
  std::string text(1, '[');
  text += rows;
  if (two_dim) {
    text += ", ";
    text += cols;
  }
  text += ']';
  return text;
}

/// A dimension for messages: the number, or "*" when any is accepted.
std::string dimension_text(std::int64_t n) {
  return n >= 0 ? std::to_string(n) : std::string("*");
}

[[noreturn]] void fail_file(const std::string& path, const std::string& problem) {
  throw FormatError("array file '" + path + "': " + problem);
}

/// Reads up to `bytes` bytes at `offset`, retrying short reads; returns fewer only at the end of
/// the file. Throws IoError naming `path`.
std::size_t read_at(int fd, void* data, std::size_t bytes, off_t offset, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd, static_cast<char*>(data) + done, bytes - done,
                                offset + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw IoError("cannot read array file '" + path + "': " + std::strerror(errno));
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

} // namespace

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes) noexcept {
  // zlib returns its initial value, not `crc`, for a null buffer (an empty vector's data()).
  if (bytes == 0) return crc;
  // crc32_z takes a size_t length, so large arrays need no chunking.
  return static_cast<std::uint32_t>(
      crc32_z(crc, static_cast<const Bytef*>(data), static_cast<z_size_t>(bytes)));
}

std::string crc_hex(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

template <typename T>
std::uint32_t write_array(const std::string& path, std::span<const T> data, std::int64_t rows,
                          std::int64_t cols) {
  const std::int64_t width = cols < 0 ? 1 : cols;
  if (rows < 0 || rows * width != static_cast<std::int64_t>(data.size())) {
    throw InvalidArgument("store array '" + path + "': shape [" + std::to_string(rows) + ", " +
                          std::to_string(cols) + "] does not hold " + std::to_string(data.size()) +
                          " elements");
  }
  const std::size_t payload_bytes = data.size_bytes();
  const std::uint32_t crc = crc32_update(0, data.data(), payload_bytes);
  unsigned char head[kArrayHeaderBytes] = {};
  std::memcpy(head, kMagic, 4);
  put32(head + 4, static_cast<std::uint32_t>(kArrayFileVersion));
  put32(head + 8, static_cast<std::uint32_t>(dtype_of<T>()));
  put32(head + 12, cols < 0 ? 1u : 2u);
  put64(head + 16, static_cast<std::uint64_t>(rows));
  put64(head + 24, static_cast<std::uint64_t>(width));
  put64(head + 32, payload_bytes);
  put32(head + 40, crc);
  write_file_atomically(path, head, sizeof head, data.data(), payload_bytes);
  return crc;
}

template <typename T>
StoredArray<T> read_array(const std::string& path, bool two_dim, std::int64_t expected_rows,
                          std::int64_t expected_cols) {
  const ArrayReader<T> reader(path, two_dim, expected_rows, expected_cols);
  return {reader.rows(), reader.cols(), reader.crc(), reader.read_rows(0, reader.rows())};
}

void check_row_range(const std::string& source, std::int64_t first, std::int64_t last,
                     std::int64_t rows) {
  if (0 <= first && first <= last && last <= rows) return;
  throw InvalidArgument(source + ": rows [" + std::to_string(first) + ", " + std::to_string(last) +
                        ") " +
                        (first > last ? std::string("are not a range (first > last)")
                                      : "are outside its rows [0, " + std::to_string(rows) + ")"));
}

template <typename T>
ArrayReader<T>::ArrayReader(std::string path, bool two_dim, std::int64_t expected_rows,
                            std::int64_t expected_cols)
    : path_(std::move(path)) {
  fd_ = open_input_file(path_);
  try {
    check_header(two_dim, expected_rows, expected_cols);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

template <typename T> ArrayReader<T>::~ArrayReader() {
  ::close(fd_);
}

template <typename T>
void ArrayReader<T>::check_header(bool two_dim, std::int64_t expected_rows,
                                  std::int64_t expected_cols) {
  const auto fail = [this](const std::string& problem) { fail_file(path_, problem); };
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    throw IoError("cannot read array file '" + path_ + "': " + std::strerror(errno));
  }
  unsigned char head[kArrayHeaderBytes];
  if (read_at(fd_, head, sizeof head, 0, path_) != sizeof head) {
    fail("truncated header (a header is " + std::to_string(kArrayHeaderBytes) + " bytes)");
  }
  if (std::memcmp(head, kMagic, 4) != 0) fail("bad magic (expected \"TSRA\")");
  const std::uint32_t version = get32(head + 4);
  if (version != static_cast<std::uint32_t>(kArrayFileVersion)) {
    fail("format version " + std::to_string(version) + ", this build reads version " +
         std::to_string(kArrayFileVersion));
  }
  const std::uint32_t dtype = get32(head + 8);
  const auto want_dtype = static_cast<std::uint32_t>(dtype_of<T>());
  if (dtype != want_dtype) {
    fail(std::string("dtype ") + dtype_name(dtype) + " (code " + std::to_string(dtype) +
         "), expected " + dtype_name(want_dtype));
  }
  const std::uint32_t ndim = get32(head + 12);
  if (ndim != (two_dim ? 2u : 1u)) {
    fail("ndim " + std::to_string(ndim) + ", expected " + (two_dim ? "2" : "1"));
  }
  const std::uint64_t rows = get64(head + 16);
  const std::uint64_t cols = get64(head + 24);
  const std::uint64_t payload_bytes = get64(head + 32);
  // Elements and bytes fit an int64 (checked_product), so the products below cannot wrap.
  constexpr auto kLimit = static_cast<std::uint64_t>(INT64_MAX);
  const bool fits =
      rows <= kLimit && cols <= kLimit &&
      checked_product({static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols),
                       static_cast<std::int64_t>(sizeof(T))})
          .has_value();
  if (!fits || (!two_dim && cols != 1)) {
    fail("implausible shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "]" +
         (fits ? ""
               : " (its element count times " + std::to_string(sizeof(T)) + " bytes overflows)"));
  }
  const bool rows_ok = expected_rows < 0 || rows == static_cast<std::uint64_t>(expected_rows);
  const bool cols_ok =
      !two_dim || expected_cols < 0 || cols == static_cast<std::uint64_t>(expected_cols);
  if (!rows_ok || !cols_ok) {
    fail("shape " + shape_text(two_dim, std::to_string(rows), std::to_string(cols)) +
         ", expected " +
         shape_text(two_dim, dimension_text(expected_rows), dimension_text(expected_cols)));
  }
  const std::uint64_t count = rows * cols;
  if (payload_bytes != count * sizeof(T)) {
    fail("header says " + std::to_string(payload_bytes) + " payload bytes, shape " +
         shape_text(two_dim, std::to_string(rows), std::to_string(cols)) + " needs " +
         std::to_string(count * sizeof(T)));
  }
  // The size comes from the data: a header may claim any shape, the file holds what it holds.
  const auto present = static_cast<std::uint64_t>(std::max<std::int64_t>(
      0, static_cast<std::int64_t>(info.st_size) - static_cast<std::int64_t>(kArrayHeaderBytes)));
  if (present < payload_bytes) {
    fail("truncated: the file holds " + std::to_string(present) +
         " payload bytes, the header says " + std::to_string(payload_bytes));
  }
  // Bytes after the payload are no part of the array: something appended them, and a reader
  // that ignored them would read a file other than the one written (as an npy payload is read).
  if (present > payload_bytes) {
    fail(std::to_string(present - payload_bytes) + " bytes after the payload: the file holds " +
         std::to_string(present) + " payload bytes, the header says " +
         std::to_string(payload_bytes));
  }
  rows_ = static_cast<std::int64_t>(rows);
  cols_ = two_dim ? static_cast<std::int64_t>(cols) : -1;
  crc_ = get32(head + 40);
}

template <typename T>
void ArrayReader<T>::read_rows(std::int64_t first, std::int64_t last, std::span<T> out) const {
  check_row_range("array file '" + path_ + "'", first, last, rows_);
  const std::int64_t width = cols_ < 0 ? 1 : cols_;
  const auto count = static_cast<std::size_t>((last - first) * width);
  if (out.size() != count) {
    throw InvalidArgument("array file '" + path_ + "': rows [" + std::to_string(first) + ", " +
                          std::to_string(last) + ") hold " + std::to_string(count) +
                          " elements, the buffer " + std::to_string(out.size()));
  }
  const std::size_t bytes = out.size_bytes();
  const auto offset = static_cast<off_t>(kArrayHeaderBytes) +
                      static_cast<off_t>(first * width) * static_cast<off_t>(sizeof(T));
  const std::size_t got = read_at(fd_, out.data(), bytes, offset, path_);
  if (got != bytes) {
    fail_file(path_, "truncated: " + std::to_string(got) + " of the " + std::to_string(bytes) +
                         " payload bytes of rows [" + std::to_string(first) + ", " +
                         std::to_string(last) + ") present");
  }
  if (first != 0 || last != rows_) return;
  const std::uint32_t actual = crc32_update(0, out.data(), bytes);
  if (actual != crc_) {
    fail_file(path_,
              "CRC-32 mismatch: header says " + crc_hex(crc_) + ", payload has " + crc_hex(actual));
  }
}

template <typename T>
std::vector<T> ArrayReader<T>::read_rows(std::int64_t first, std::int64_t last) const {
  // Sized only after the range is checked: a bad range must not allocate by it.
  check_row_range("array file '" + path_ + "'", first, last, rows_);
  std::vector<T> out(static_cast<std::size_t>((last - first) * (cols_ < 0 ? 1 : cols_)));
  read_rows(first, last, out);
  return out;
}

#define TESSERA_STORE_ARRAY(T)                                                                     \
  template std::uint32_t write_array<T>(const std::string&, std::span<const T>, std::int64_t,      \
                                        std::int64_t);                                             \
  template StoredArray<T> read_array<T>(const std::string&, bool, std::int64_t, std::int64_t);     \
  template class ArrayReader<T>;
TESSERA_STORE_ARRAY(std::int32_t)
TESSERA_STORE_ARRAY(std::int64_t)
TESSERA_STORE_ARRAY(float)
TESSERA_STORE_ARRAY(std::uint8_t)
#undef TESSERA_STORE_ARRAY

} // namespace tessera::io
