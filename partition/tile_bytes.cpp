// A tile as one byte string: what the partitioning rank sends each rank when no store is used.
#include "byte_stream.hpp"
#include "tessera/core/error.hpp"
#include "tessera/partition/local_graph.hpp"

#include <cstring>
#include <fmt/core.h>
#include <type_traits>

namespace tessera::partition {

namespace {

constexpr std::uint32_t kTileMagic = 0x454C4954; // "TILE"

} // namespace

std::vector<std::byte> tile_to_bytes(const LocalGraph& tile) {
  detail::Writer w;
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
  detail::Reader r(backend, bytes, "tile bytes");
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
