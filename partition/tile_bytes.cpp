// A tile as one byte string: what the partitioning rank sends each rank when no store is used.
#include "tessera/core/error.hpp"
#include "tessera/partition/local_graph.hpp"

#include <cstring>
#include <fmt/core.h>
#include <type_traits>

namespace tessera::partition {

namespace {

constexpr std::uint32_t kTileMagic = 0x454C4954; // "TILE"

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

class Reader {
public:
  Reader(const BackendPtr& backend, std::span<const std::byte> bytes)
      : backend_(backend), bytes_(bytes) {}

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
    const auto count = value<std::int64_t>();
    if (count < 0 || static_cast<std::size_t>(count) * sizeof(T) > bytes_.size() - at_)
      fail(fmt::format("an array of {} entries", count));
    std::vector<T> v(static_cast<std::size_t>(count));
    raw(v.data(), v.size() * sizeof(T));
    return v;
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
    throw FormatError(fmt::format("tile bytes ({} in all): {}", bytes_.size(), what));
  }

  BackendPtr backend_;
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

} // namespace

std::vector<std::byte> tile_to_bytes(const LocalGraph& tile) {
  Writer w;
  w.value(kTileMagic);
  w.value(tile.part);
  w.value(tile.num_parts);
  w.value(tile.num_global_nodes);
  w.vector(tile.owned_ids);
  w.vector(tile.ghost_ids);
  w.vector(tile.ghost_owner);
  w.vector(tile.degree);
  w.csr(tile.adjacency);
  const std::uint8_t kind = tile.features.dense ? 1 : tile.features.sparse ? 2 : 0;
  w.value(kind);
  if (tile.features.dense) {
    const Dense& x = *tile.features.dense;
    w.value(x.rows());
    w.value(x.cols());
    w.array(x.data(), x.size());
  } else if (tile.features.sparse) {
    w.csr(*tile.features.sparse);
  }
  w.vector(tile.labels);
  w.value(tile.num_classes);
  w.vector(tile.train_idx);
  w.vector(tile.val_idx);
  w.vector(tile.test_idx);
  return w.take();
}

LocalGraph tile_from_bytes(const BackendPtr& backend, std::span<const std::byte> bytes) {
  Reader r(backend, bytes);
  if (r.value<std::uint32_t>() != kTileMagic) throw FormatError("tile bytes: no tile magic");
  LocalGraph tile;
  tile.part = r.value<int>();
  tile.num_parts = r.value<int>();
  tile.num_global_nodes = r.value<std::int64_t>();
  tile.owned_ids = r.vector<GlobalId>();
  tile.ghost_ids = r.vector<GlobalId>();
  tile.ghost_owner = r.vector<std::int32_t>();
  tile.degree = r.vector<std::int64_t>();
  tile.adjacency = r.csr();
  const auto kind = r.value<std::uint8_t>();
  if (kind == 1) {
    const auto rows = r.value<std::int64_t>();
    const auto cols = r.value<std::int64_t>();
    if (rows != tile.n_owned() || cols < 0) {
      throw FormatError("tile bytes: features " + shape_string(rows, cols) + " for " +
                        std::to_string(tile.n_owned()) + " owned rows");
    }
    Dense x(backend, rows, cols);
    r.array(x.data(), x.size());
    tile.features.dense = std::move(x);
  } else if (kind == 2) {
    tile.features.sparse = r.csr();
  }
  tile.labels = r.vector<std::int32_t>();
  tile.num_classes = r.value<std::int32_t>();
  tile.train_idx = r.vector<std::int32_t>();
  tile.val_idx = r.vector<std::int32_t>();
  tile.test_idx = r.vector<std::int32_t>();
  r.expect_end();
  const std::int64_t n_local = tile.n_owned() + tile.n_ghost();
  if (tile.adjacency.rows() != tile.n_owned() || tile.adjacency.cols() != n_local ||
      static_cast<std::int64_t>(tile.degree.size()) != n_local ||
      tile.ghost_owner.size() != tile.ghost_ids.size() || tile.features.rows() != tile.n_owned() ||
      (!tile.labels.empty() && static_cast<std::int64_t>(tile.labels.size()) != tile.n_owned())) {
    throw FormatError(fmt::format("tile bytes: part {} has {} owned and {} ghost rows but "
                                  "adjacency {}, {} degrees, {} feature rows, {} labels",
                                  tile.part, tile.n_owned(), tile.n_ghost(), tile.adjacency.shape(),
                                  tile.degree.size(), tile.features.rows(), tile.labels.size()));
  }
  return tile;
}

} // namespace tessera::partition
