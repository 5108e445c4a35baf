// Dense (row-major) and CSR tensors that own backend memory, and the non-owning views kernels take.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/types.hpp"

namespace tessera {

/// Uninitialized, aligned storage for `size` elements of T on one backend. Move-only.
template <typename T>
class Buffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  Buffer() = default;
  Buffer(BackendPtr backend, std::int64_t size) : backend_(std::move(backend)), size_(size) {
    if (size < 0) throw InvalidArgument("Buffer size must be non-negative, got " + std::to_string(size));
    if (size > 0) data_ = static_cast<T*>(backend_->allocate(bytes()));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer(std::move(other)).swap(*this);
    return *this;
  }
  ~Buffer() {
    if (data_ != nullptr) backend_->deallocate(data_, bytes());
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::int64_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(size_) * sizeof(T); }
  const BackendPtr& backend() const noexcept { return backend_; }
  std::span<T> span() noexcept { return {data_, static_cast<std::size_t>(size_)}; }
  std::span<const T> span() const noexcept { return {data_, static_cast<std::size_t>(size_)}; }
  T& operator[](std::int64_t i) noexcept { return data_[i]; }
  const T& operator[](std::int64_t i) const noexcept { return data_[i]; }

  void swap(Buffer& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

 private:
  BackendPtr backend_;
  T* data_ = nullptr;
  std::int64_t size_ = 0;
};

/// A non-owning row-major view [rows, cols] with contiguous rows. T may be const.
template <typename T>
struct DenseView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  DenseView() = default;
  DenseView(T* d, std::int64_t r, std::int64_t c) : data(d), rows(r), cols(c) {}
  /// A mutable view converts to a const one.
  template <typename U>
    requires std::is_same_v<const U, T> && (!std::is_same_v<U, T>)
  DenseView(DenseView<U> other) : data(other.data), rows(other.rows), cols(other.cols) {}

  T& operator()(std::int64_t r, std::int64_t c) const noexcept { return data[r * cols + c]; }
  T* row(std::int64_t r) const noexcept { return data + r * cols; }
  std::int64_t size() const noexcept { return rows * cols; }
  /// Rows [begin, end) of this view.
  DenseView slice_rows(std::int64_t begin, std::int64_t end) const noexcept {
    return {data + begin * cols, end - begin, cols};
  }
};

template <typename T>
using ConstDenseView = DenseView<const T>;

/// "[rows, cols]" for error messages.
std::string shape_string(std::int64_t rows, std::int64_t cols);

/// An owning row-major matrix of T on one backend. Dense = DenseT<float> is the working type;
/// DenseT<double> exists for gradient checks.
template <typename T>
class DenseT {
 public:
  DenseT() = default;
  /// Uninitialized [rows, cols].
  DenseT(BackendPtr backend, std::int64_t rows, std::int64_t cols)
      : buffer_(std::move(backend), checked_size(rows, cols)), rows_(rows), cols_(cols) {}

  static DenseT zeros(BackendPtr backend, std::int64_t rows, std::int64_t cols);

  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::int64_t size() const noexcept { return rows_ * cols_; }
  std::size_t bytes() const noexcept { return buffer_.bytes(); }
  T* data() noexcept { return buffer_.data(); }
  const T* data() const noexcept { return buffer_.data(); }
  const BackendPtr& backend() const noexcept { return buffer_.backend(); }
  bool empty() const noexcept { return size() == 0; }

  DenseView<T> view() noexcept { return {data(), rows_, cols_}; }
  ConstDenseView<T> view() const noexcept { return {data(), rows_, cols_}; }
  ConstDenseView<T> cview() const noexcept { return {data(), rows_, cols_}; }
  T& operator()(std::int64_t r, std::int64_t c) noexcept { return data()[r * cols_ + c]; }
  const T& operator()(std::int64_t r, std::int64_t c) const noexcept {
    return data()[r * cols_ + c];
  }
  std::string shape() const { return shape_string(rows_, cols_); }

  /// Sets every element to `value` (host memory).
  void fill(T value);

 private:
  static std::int64_t checked_size(std::int64_t rows, std::int64_t cols) {
    if (rows < 0 || cols < 0) throw InvalidArgument("negative matrix shape " + shape_string(rows, cols));
    return rows * cols;
  }

  Buffer<T> buffer_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
};

using Dense = DenseT<float>;

/// A non-owning CSR view [rows, cols]: row_ptr has rows + 1 entries, col and val have nnz.
/// Column ids are local 32-bit ids, sorted within each row.
template <typename T>
struct CsrView {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const Offset* row_ptr = nullptr;
  const LocalId* col = nullptr;
  const T* val = nullptr;

  std::int64_t nnz() const noexcept { return rows == 0 ? 0 : row_ptr[rows] - row_ptr[0]; }

  /// Rows [begin, end) as a matrix of their own: same columns, row_ptr offsets still index the
  /// whole matrix's col and val (every kernel reads col[row_ptr[r]] ... col[row_ptr[r + 1]]).
  CsrView row_slice(std::int64_t begin, std::int64_t end) const noexcept {
    return {end - begin, cols, row_ptr + begin, col, val};
  }
};

/// An owning CSR matrix. Csr = CsrT<float>.
template <typename T>
class CsrT {
 public:
  CsrT() = default;
  /// Allocates rows + 1 row pointers and nnz columns and values, uninitialized.
  CsrT(BackendPtr backend, std::int64_t rows, std::int64_t cols, std::int64_t nnz);

  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::int64_t nnz() const noexcept { return col_.size(); }
  std::size_t bytes() const noexcept { return row_ptr_.bytes() + col_.bytes() + val_.bytes(); }
  const BackendPtr& backend() const noexcept { return row_ptr_.backend(); }

  Offset* row_ptr() noexcept { return row_ptr_.data(); }
  const Offset* row_ptr() const noexcept { return row_ptr_.data(); }
  LocalId* col() noexcept { return col_.data(); }
  const LocalId* col() const noexcept { return col_.data(); }
  T* val() noexcept { return val_.data(); }
  const T* val() const noexcept { return val_.data(); }

  CsrView<T> view() const noexcept {
    return {rows_, cols_, row_ptr_.data(), col_.data(), val_.data()};
  }
  std::string shape() const { return shape_string(rows_, cols_); }

  /// The same structure with values converted to U (used by float64 gradient checks).
  template <typename U>
  CsrT<U> cast() const;

 private:
  Buffer<Offset> row_ptr_;
  Buffer<LocalId> col_;
  Buffer<T> val_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
};

using Csr = CsrT<float>;

/// A copy of `x` in the memory of `target` (host ↔ device, or between devices).
template <typename T>
DenseT<T> to_backend(const DenseT<T>& x, const BackendPtr& target);
template <typename T>
CsrT<T> to_backend(const CsrT<T>& x, const BackendPtr& target);

template <typename T>
CsrT<T>::CsrT(BackendPtr backend, std::int64_t rows, std::int64_t cols, std::int64_t nnz)
    : row_ptr_(backend, rows + 1), col_(backend, nnz), val_(backend, nnz), rows_(rows), cols_(cols) {
  if (rows < 0 || cols < 0) throw InvalidArgument("negative CSR shape " + shape_string(rows, cols));
  row_ptr_.backend()->zero_bytes(row_ptr_.data(), sizeof(Offset));  // host or device memory
}

template <typename T>
template <typename U>
CsrT<U> CsrT<T>::cast() const {
  CsrT<U> out(backend(), rows_, cols_, nnz());
  for (std::int64_t i = 0; i <= rows_; ++i) out.row_ptr()[i] = row_ptr_[i];
  for (std::int64_t k = 0; k < nnz(); ++k) {
    out.col()[k] = col_[k];
    out.val()[k] = static_cast<U>(val_[k]);
  }
  return out;
}

}  // namespace tessera
