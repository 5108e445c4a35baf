// Arrays and matrices as one byte string and back: how tiles and rows travel between ranks.
#pragma once

#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fmt/core.h>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera::partition::detail {

/// Appends values, counted arrays and CSR matrices to a byte string.
class Writer {
public:
  template <typename T> void value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    raw(&v, sizeof(T));
  }
  template <typename T> void array(const T* data, std::int64_t count) {
    value(count);
    raw(data, static_cast<std::size_t>(count) * sizeof(T));
  }
  template <typename T> void vector(const std::vector<T>& v) {
    array(v.data(), static_cast<std::int64_t>(v.size()));
  }
  /// Values without a count: an array written in pieces after its count (value(count)).
  template <typename T> void items(const T* data, std::int64_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    raw(data, static_cast<std::size_t>(count) * sizeof(T));
  }
  /// Room for `bytes` more, so that a string of known size is allocated once.
  void reserve(std::size_t bytes) { bytes_.reserve(bytes_.size() + bytes); }
  void csr(const Csr& m) {
    value(m.rows());
    value(m.cols());
    array(m.row_ptr(), m.rows() + 1);
    array(m.col(), m.nnz());
    array(m.val(), m.nnz());
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

private:
  void raw(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), p, p + size);
  }
  std::vector<std::byte> bytes_;
};

/// Reads back what a Writer wrote, checking every count against the bytes left; a short or
/// inconsistent string throws FormatError naming `what`.
class Reader {
public:
  /// `what` names the bytes in errors ("tile bytes").
  Reader(const BackendPtr& backend, std::span<const std::byte> bytes, std::string what)
      : backend_(backend), bytes_(bytes), what_(std::move(what)) {}

  template <typename T> T value() {
    T v;
    raw(&v, sizeof(T));
    return v;
  }
  /// Reads an array's count, checks it is `expected` (when >= 0), and copies it into `out`.
  template <typename T> void array(T* out, std::int64_t expected) {
    const auto count = value<std::int64_t>();
    if (count != expected)
      fail(fmt::format("an array of {} entries where {} belong", count, expected));
    raw(out, static_cast<std::size_t>(count) * sizeof(T));
  }
  template <typename T> std::vector<T> vector() {
    std::vector<T> v;
    append_to(v);
    return v;
  }
  /// Reads a counted array onto the end of `to` (no copy in between).
  template <typename T> void append_to(std::vector<T>& to) {
    const auto count = value<std::int64_t>();
    if (count < 0 || static_cast<std::size_t>(count) * sizeof(T) > bytes_.size() - at_)
      fail(fmt::format("an array of {} entries", count));
    const std::size_t at = to.size();
    to.resize(at + static_cast<std::size_t>(count));
    raw(to.data() + at, static_cast<std::size_t>(count) * sizeof(T));
  }
  /// Skips a counted array; returns its count.
  template <typename T> std::int64_t skip() {
    const auto count = value<std::int64_t>();
    if (count < 0 || static_cast<std::size_t>(count) * sizeof(T) > bytes_.size() - at_)
      fail(fmt::format("an array of {} entries", count));
    at_ += static_cast<std::size_t>(count) * sizeof(T);
    return count;
  }
  Csr csr() {
    const auto rows = value<std::int64_t>();
    const auto cols = value<std::int64_t>();
    if (rows < 0 || cols < 0 || rows > static_cast<std::int64_t>(bytes_.size()))
      fail(fmt::format("a matrix of shape {}", shape_string(rows, cols)));
    std::vector<Offset> row_ptr(static_cast<std::size_t>(rows) + 1);
    array(row_ptr.data(), rows + 1);
    Csr m(backend_, rows, cols, row_ptr.back());
    std::copy(row_ptr.begin(), row_ptr.end(), m.row_ptr());
    array(m.col(), m.nnz());
    array(m.val(), m.nnz());
    return m;
  }
  void expect_end() const {
    if (at_ != bytes_.size()) fail(fmt::format("{} bytes left over", bytes_.size() - at_));
  }

private:
  void raw(void* out, std::size_t size) {
    if (size > bytes_.size() - at_) fail(fmt::format("{} bytes needed at offset {}", size, at_));
    if (size == 0) return; // `out` may be an empty vector's null data()
    std::memcpy(out, bytes_.data() + at_, size);
    at_ += size;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(fmt::format("{} ({} in all): {}", what_, bytes_.size(), what));
  }

  BackendPtr backend_;
  std::span<const std::byte> bytes_;
  std::string what_;
  std::size_t at_ = 0;
};

} // namespace tessera::partition::detail
