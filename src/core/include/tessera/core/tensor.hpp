// Dense (row-major) and CSR tensors that own backend memory, and the non-owning views kernels take.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/sizes.hpp"
#include "tessera/core/types.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace tessera {

/// Uninitialized, aligned storage for `size` elements of T on one backend. Move-only.
template <typename T> class Buffer {
  static_assert(std::is_trivially_copyable_v<T>);

public:
  /// An empty buffer with no backend.
  Buffer() = default;
  /// Allocates `size` elements on `backend` (none for 0). Throws InvalidArgument for a negative
  /// size, and the backend's error when memory runs out.
  Buffer(BackendPtr backend, std::int64_t size) : backend_(std::move(backend)), size_(size) {
    if (size < 0)
      throw InvalidArgument("Buffer size must be non-negative, got " + std::to_string(size));
    if (!checked_product({size, static_cast<std::int64_t>(sizeof(T))})) {
      throw InvalidArgument("a buffer of " + std::to_string(size) + " elements of " +
                            std::to_string(sizeof(T)) +
                            " bytes holds more bytes than a 64-bit "
                            "size");
    }
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

  /// The elements (nullptr when empty), in the backend's memory; size() counts elements,
  /// bytes() their bytes. operator[] reads and writes host memory: CPU-backend buffers only.
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::int64_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(size_) * sizeof(T); }
  const BackendPtr& backend() const noexcept { return backend_; }
  std::span<T> span() noexcept { return {data_, static_cast<std::size_t>(size_)}; }
  std::span<const T> span() const noexcept { return {data_, static_cast<std::size_t>(size_)}; }
  T& operator[](std::int64_t i) noexcept { return data_[i]; }
  const T& operator[](std::int64_t i) const noexcept { return data_[i]; }

  /// Exchanges storage and backend with `other`.
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

/// Page-locked host memory of `size()` bytes from a backend's allocate_pinned(), which that
/// backend's copy_async() moves to and from its memory directly. Move-only.
class PinnedBuffer {
public:
  /// An empty buffer with no backend.
  PinnedBuffer() = default;
  /// Allocates `bytes` (none for 0) with backend->allocate_pinned(); throws the backend's error.
  PinnedBuffer(BackendPtr backend, std::size_t bytes) : backend_(std::move(backend)), size_(bytes) {
    if (bytes > 0) data_ = static_cast<std::byte*>(backend_->allocate_pinned(bytes));
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept { swap(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    PinnedBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) backend_->deallocate_pinned(data_, size_);
  }

  /// The bytes (nullptr when empty), readable and writable on the host.
  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::span<std::byte> span() const noexcept { return {data_, size_}; }

  /// Exchanges memory and backend with `other`.
  void swap(PinnedBuffer& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

private:
  BackendPtr backend_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A non-owning row-major view [rows, cols] with contiguous rows. T may be const.
template <typename T> struct DenseView {
  T* data = nullptr; ///< element (r, c) is data[r * cols + c]
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  /// An empty [0, 0] view.
  DenseView() = default;
  /// Views `d` as [r, c].
  DenseView(T* d, std::int64_t r, std::int64_t c) : data(d), rows(r), cols(c) {}
  /// A mutable view converts to a const one.
  template <typename U>
  requires std::is_same_v<const U, T> &&(!std::is_same_v<U, T>)DenseView(DenseView<U> other)
      : data(other.data), rows(other.rows), cols(other.cols) {}

  /// Element (r, c), the start of row r, and the element count. operator() dereferences on the
  /// host: CPU-backend memory only.
  T& operator()(std::int64_t r, std::int64_t c) const noexcept { return data[r * cols + c]; }
  T* row(std::int64_t r) const noexcept { return data + r * cols; }
  std::int64_t size() const noexcept { return rows * cols; }
  /// Rows [begin, end) of this view: [end - begin, cols].
  DenseView slice_rows(std::int64_t begin, std::int64_t end) const noexcept {
    return {data + begin * cols, end - begin, cols};
  }
};

/// A read-only view [rows, cols].
template <typename T> using ConstDenseView = DenseView<const T>;

/// "[rows, cols]" for error messages.
std::string shape_string(std::int64_t rows, std::int64_t cols);

/// An owning row-major matrix of T on one backend. Dense = DenseT<float> is the working type;
/// DenseT<double> exists for gradient checks.
template <typename T> class DenseT {
public:
  /// An empty [0, 0] matrix with no backend.
  DenseT() = default;
  /// Uninitialized [rows, cols]. Throws InvalidArgument for a negative shape.
  DenseT(BackendPtr backend, std::int64_t rows, std::int64_t cols)
      : buffer_(std::move(backend), checked_size(rows, cols)), rows_(rows), cols_(cols) {}

  /// [rows, cols] of zeros (zeroed in order with the backend's kernels).
  static DenseT zeros(BackendPtr backend, std::int64_t rows, std::int64_t cols);

  /// Shape, element count, bytes, elements (in the backend's memory) and backend; empty() when
  /// there are no elements.
  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::int64_t size() const noexcept { return rows_ * cols_; }
  std::size_t bytes() const noexcept { return buffer_.bytes(); }
  T* data() noexcept { return buffer_.data(); }
  const T* data() const noexcept { return buffer_.data(); }
  const BackendPtr& backend() const noexcept { return buffer_.backend(); }
  bool empty() const noexcept { return size() == 0; }

  /// [rows, cols] views of the whole matrix, valid while it lives; cview() is always read-only.
  DenseView<T> view() noexcept { return {data(), rows_, cols_}; }
  ConstDenseView<T> view() const noexcept { return {data(), rows_, cols_}; }
  ConstDenseView<T> cview() const noexcept { return {data(), rows_, cols_}; }
  /// Element (r, c), read on the host: CPU-backend matrices only.
  T& operator()(std::int64_t r, std::int64_t c) noexcept { return data()[r * cols_ + c]; }
  const T& operator()(std::int64_t r, std::int64_t c) const noexcept {
    return data()[r * cols_ + c];
  }
  /// "[rows, cols]" for messages.
  std::string shape() const { return shape_string(rows_, cols_); }

  /// Sets every element to `value`. Host memory only: throws InvalidArgument on another backend.
  void fill(T value);

private:
  static std::int64_t checked_size(std::int64_t rows, std::int64_t cols) {
    if (rows < 0 || cols < 0)
      throw InvalidArgument("negative matrix shape " + shape_string(rows, cols));
    const std::optional<std::int64_t> size = checked_product({rows, cols});
    if (!size) {
      throw InvalidArgument("matrix shape " + shape_string(rows, cols) +
                            " holds more elements than a 64-bit count");
    }
    return *size;
  }

  Buffer<T> buffer_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
};

/// The working dense matrix type (float32).
using Dense = DenseT<float>;

/// A non-owning CSR view [rows, cols]: row_ptr has rows + 1 entries, col and val have nnz.
/// Column ids are local 32-bit ids, sorted within each row. `handle` and `first_row` say which
/// matrix and rows the view shows, for caches of per-matrix work (the CUDA backend's SpMM plans);
/// a view built by hand leaves them 0 and is not cached.
template <typename T> struct CsrView {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const Offset* row_ptr = nullptr; ///< [rows + 1]; row r is entries [row_ptr[r], row_ptr[r + 1])
  const LocalId* col = nullptr;    ///< [nnz] column ids in [0, cols)
  const T* val = nullptr;          ///< [nnz] values
  /// The row of the whole matrix this view starts at (non-zero for a row_slice).
  std::int64_t first_row = 0;
  /// CsrT::handle() of the matrix viewed; 0 for a view not made from a CsrT.
  std::uint64_t handle = 0;

  /// Entries of these rows. Reads row_ptr on the host: CPU-backend memory only.
  std::int64_t nnz() const noexcept { return rows == 0 ? 0 : row_ptr[rows] - row_ptr[0]; }

  /// Rows [begin, end) as a matrix of their own: same columns, row_ptr offsets still index the
  /// whole matrix's col and val (every kernel reads col[row_ptr[r]] ... col[row_ptr[r + 1]]).
  CsrView row_slice(std::int64_t begin, std::int64_t end) const noexcept {
    return {end - begin, cols, row_ptr + begin, col, val, first_row + begin, handle};
  }
};

/// A new CSR matrix handle: unique in the process (a counter, never 0, never reused).
std::uint64_t new_matrix_handle() noexcept;

/// While alive, calls `on_release(handle)` whenever a CsrT is destroyed or assigned over, on the
/// thread doing it, before the matrix's memory is freed: for caches keyed by CsrView::handle
/// (the CUDA backend's SpMM plans). `on_release` must not throw, and must not make or destroy a
/// subscription. Thread-safe.
class MatrixReleaseSubscription {
public:
  explicit MatrixReleaseSubscription(std::function<void(std::uint64_t)> on_release);
  ~MatrixReleaseSubscription();
  MatrixReleaseSubscription(const MatrixReleaseSubscription&) = delete;
  MatrixReleaseSubscription& operator=(const MatrixReleaseSubscription&) = delete;

private:
  std::uint64_t id_;
};

namespace detail {
/// Calls every subscription's `on_release(handle)` (CsrT's destructor and move assignment).
void notify_matrix_released(std::uint64_t handle) noexcept;
} // namespace detail

/// An owning CSR matrix [rows, cols] on one backend; the layout of CsrView. Csr = CsrT<float>.
/// Move-only; a matrix keeps its handle() when moved, a copy (cast, to_backend) gets a new one.
template <typename T> class CsrT {
public:
  /// An empty [0, 0] matrix with no backend, no row pointers and handle 0.
  CsrT() = default;
  /// Allocates rows + 1 row pointers and nnz columns and values, uninitialized except
  /// row_ptr[0] = 0. Throws InvalidArgument for a negative shape or nnz.
  CsrT(BackendPtr backend, std::int64_t rows, std::int64_t cols, std::int64_t nnz);
  CsrT(CsrT&& other) noexcept
      : row_ptr_(std::move(other.row_ptr_)), col_(std::move(other.col_)),
        val_(std::move(other.val_)), rows_(std::exchange(other.rows_, 0)),
        cols_(std::exchange(other.cols_, 0)), handle_(std::exchange(other.handle_, 0)) {}
  /// Releases this matrix (its handle's subscribers hear of it) and takes `other`'s place.
  CsrT& operator=(CsrT&& other) noexcept {
    CsrT(std::move(other)).swap(*this);
    return *this;
  }
  ~CsrT() {
    if (handle_ != 0) detail::notify_matrix_released(handle_);
  }

  /// What identifies this matrix to caches (CsrView::handle): new_matrix_handle() at
  /// construction, kept by moves; 0 for an empty default-constructed matrix.
  std::uint64_t handle() const noexcept { return handle_; }

  /// Shape, stored entries, bytes of all three arrays, and backend.
  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }
  std::int64_t nnz() const noexcept { return col_.size(); }
  std::size_t bytes() const noexcept { return row_ptr_.bytes() + col_.bytes() + val_.bytes(); }
  const BackendPtr& backend() const noexcept { return row_ptr_.backend(); }

  /// The arrays of CsrView (row_ptr [rows + 1], col [nnz], val [nnz]) in the backend's memory.
  Offset* row_ptr() noexcept { return row_ptr_.data(); }
  const Offset* row_ptr() const noexcept { return row_ptr_.data(); }
  LocalId* col() noexcept { return col_.data(); }
  const LocalId* col() const noexcept { return col_.data(); }
  T* val() noexcept { return val_.data(); }
  const T* val() const noexcept { return val_.data(); }

  /// A [rows, cols] view, valid while this matrix lives.
  CsrView<T> view() const noexcept {
    return {rows_, cols_, row_ptr_.data(), col_.data(), val_.data(), 0, handle_};
  }
  /// "[rows, cols]" for messages.
  std::string shape() const { return shape_string(rows_, cols_); }

  /// The same structure with values converted to U, on the same backend (used by float64
  /// gradient checks). Copies on the host: CPU-backend matrices only.
  template <typename U> CsrT<U> cast() const;

private:
  void swap(CsrT& other) noexcept {
    row_ptr_.swap(other.row_ptr_);
    col_.swap(other.col_);
    val_.swap(other.val_);
    std::swap(rows_, other.rows_);
    std::swap(cols_, other.cols_);
    std::swap(handle_, other.handle_);
  }

  Buffer<Offset> row_ptr_;
  Buffer<LocalId> col_;
  Buffer<T> val_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  std::uint64_t handle_ = 0;
};

/// The working sparse matrix type (float32 values).
using Csr = CsrT<float>;

/// A copy of `x` ([rows, cols]) in the memory of `target` (host ↔ device, or between devices);
/// returns when the copy holds the data.
template <typename T> DenseT<T> to_backend(const DenseT<T>& x, const BackendPtr& target);
/// A copy of the CSR matrix `x` ([rows, cols], same structure) in the memory of `target`.
template <typename T> CsrT<T> to_backend(const CsrT<T>& x, const BackendPtr& target);

template <typename T>
CsrT<T>::CsrT(BackendPtr backend, std::int64_t rows, std::int64_t cols, std::int64_t nnz)
    : row_ptr_(backend, rows + 1), col_(backend, nnz), val_(backend, nnz), rows_(rows), cols_(cols),
      handle_(new_matrix_handle()) {
  if (rows < 0 || cols < 0) throw InvalidArgument("negative CSR shape " + shape_string(rows, cols));
  row_ptr_.backend()->zero_bytes(row_ptr_.data(), sizeof(Offset)); // host or device memory
}

template <typename T> template <typename U> CsrT<U> CsrT<T>::cast() const {
  CsrT<U> out(backend(), rows_, cols_, nnz());
  for (std::int64_t i = 0; i <= rows_; ++i)
    out.row_ptr()[i] = row_ptr_[i];
  for (std::int64_t k = 0; k < nnz(); ++k) {
    out.col()[k] = col_[k];
    out.val()[k] = static_cast<U>(val_[k]);
  }
  return out;
}

} // namespace tessera
