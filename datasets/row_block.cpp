// Rank-local loading: row shares, and a block of rows read from a native folder or cut from a
// whole dataset.
#include "tessera/datasets/row_block.hpp"

#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/array_file.hpp"

#include <algorithm>
#include <functional>

namespace tessera::datasets {

namespace {

using namespace detail;

/// The folder of a native dataset spec (native:DIR, or a folder holding dataset.json), or "" for
/// any other spec; load_dataset tells them apart the same way.
std::string native_folder(const std::string& spec) {
  constexpr std::string_view kPrefix = "native:";
  if (spec.starts_with(kPrefix)) return spec.substr(kPrefix.size());
  return spec.find(':') == std::string::npos && is_native_dataset(spec) ? spec : "";
}

/// Rows `rows` of `m`: [rows.size(), m.cols()], row pointers from 0.
Csr csr_rows(const Csr& m, RowRange rows) {
  const Offset begin = m.row_ptr()[rows.first], end = m.row_ptr()[rows.last];
  Csr out(m.backend(), rows.size(), m.cols(), end - begin);
  for (std::int64_t i = 0; i <= rows.size(); ++i)
    out.row_ptr()[i] = m.row_ptr()[rows.first + i] - begin;
  std::copy(m.col() + begin, m.col() + end, out.col());
  std::copy(m.val() + begin, m.val() + end, out.val());
  return out;
}

/// The ids of the ascending `ids` inside `rows`.
std::vector<std::int32_t> ids_in(const std::vector<std::int32_t>& ids, RowRange rows) {
  const auto first = std::lower_bound(ids.begin(), ids.end(), rows.first);
  return {first, std::lower_bound(first, ids.end(), rows.last)};
}

/// What the native reader reads of rows `rows`, cut from the whole dataset.
io::GraphFiles cut_rows(const Dataset& ds, RowRange rows) {
  io::GraphFiles files;
  files.adjacency = csr_rows(ds.adjacency, rows);
  if (ds.features.dense) {
    const Dense& x = *ds.features.dense;
    Dense out(x.backend(), rows.size(), x.cols());
    std::copy(x.data() + rows.first * x.cols(), x.data() + rows.last * x.cols(), out.data());
    files.features.dense = std::move(out);
  } else if (ds.features.sparse) {
    files.features.sparse = csr_rows(*ds.features.sparse, rows);
  }
  if (ds.has_labels()) {
    files.labels.assign(ds.labels.begin() + rows.first, ds.labels.begin() + rows.last);
  }
  files.train_idx = ids_in(ds.train_idx, rows);
  files.val_idx = ids_in(ds.val_idx, rows);
  files.test_idx = ids_in(ds.test_idx, rows);
  return files;
}

} // namespace

RowRange row_share(std::int64_t num_nodes, int rank, int ranks) {
  if (num_nodes < 0 || rank < 0 || rank >= ranks) {
    throw InvalidArgument("row_share: no share of " + std::to_string(num_nodes) +
                          " rows for rank " + std::to_string(rank) + " of " +
                          std::to_string(ranks) +
                          " (expected num_nodes >= 0 and 0 <= rank < ranks)");
  }
  const std::int64_t base = num_nodes / ranks, extra = num_nodes % ranks;
  const std::int64_t first = rank * base + std::min<std::int64_t>(rank, extra);
  return {first, first + base + (rank < extra ? 1 : 0)};
}

int row_share_rank(std::int64_t row, std::int64_t num_nodes, int ranks) {
  if (row < 0 || row >= num_nodes || ranks < 1) {
    throw InvalidArgument("row_share_rank: row " + std::to_string(row) + " is not one of " +
                          std::to_string(num_nodes) + " rows shared by " + std::to_string(ranks) +
                          " ranks");
  }
  const std::int64_t base = num_nodes / ranks, extra = num_nodes % ranks;
  const std::int64_t big = extra * (base + 1); // the rows of the ranks that hold one more
  return static_cast<int>(row < big ? row / (base + 1) : extra + (row - big) / base);
}

namespace detail {

RowBlock make_row_block(std::string name, std::int64_t num_nodes, std::int32_t num_classes,
                        RowRange rows, io::GraphFiles&& files) {
  RowBlock block;
  block.name = std::move(name);
  block.num_nodes = num_nodes;
  block.num_classes = num_classes;
  block.rows = rows;
  const Csr& a = files.adjacency;
  block.row_ptr.assign(a.row_ptr(), a.row_ptr() + a.rows() + 1);
  block.col.assign(a.col(), a.col() + a.nnz());
  block.features = std::move(files.features);
  block.labels = std::move(files.labels);
  block.train_idx.assign(files.train_idx.begin(), files.train_idx.end());
  block.val_idx.assign(files.val_idx.begin(), files.val_idx.end());
  block.test_idx.assign(files.test_idx.begin(), files.test_idx.end());
  return block;
}

} // namespace detail

namespace {

/// The block of `spec` whose rows `choose` picks from the node count.
RowBlock load_block(const BackendPtr& backend, const std::string& spec, const LoadOptions& options,
                    const std::function<RowRange(std::int64_t num_nodes)>& choose) {
  require_host(backend);
  if (const std::string dir = native_folder(spec); !dir.empty()) {
    return load_native_rows(dir, choose, options.split_index, options.allow_split_overlap);
  }
  const Dataset ds = load_dataset(backend, spec, options);
  const RowRange rows = choose(ds.num_nodes);
  io::check_row_range("dataset '" + spec + "'", rows.first, rows.last, ds.num_nodes);
  RowBlock block = make_row_block(ds.name, ds.num_nodes, ds.num_classes, rows, cut_rows(ds, rows));
  block.row_normalize = ds.row_normalize;
  return block;
}

} // namespace

RowBlock load_dataset_rows(const BackendPtr& backend, const std::string& spec,
                           const LoadOptions& options, RowRange rows) {
  return load_block(backend, spec, options, [rows](std::int64_t) { return rows; });
}

RowBlock load_dataset_share(const BackendPtr& backend, const std::string& spec,
                            const LoadOptions& options, int rank, int ranks) {
  return load_block(backend, spec, options,
                    [=](std::int64_t num_nodes) { return row_share(num_nodes, rank, ranks); });
}

std::array<std::int64_t, 2> symmetry_sums(const RowBlock& block) {
  std::int64_t high = 0, low = 0;
  constexpr std::uint64_t kLow = 0xFFFFFFFFull;
#pragma omp parallel for reduction(+ : high, low) schedule(static)
  for (std::int64_t i = 0; i < block.rows.size(); ++i) {
    const std::int64_t r = block.rows.first + i;
    for (std::int64_t k = block.row_ptr[i]; k < block.row_ptr[i + 1]; ++k) {
      const std::uint64_t there = pair_hash(r, block.col[k]), back = pair_hash(block.col[k], r);
      high += static_cast<std::int64_t>(there >> 32) - static_cast<std::int64_t>(back >> 32);
      low += static_cast<std::int64_t>(there & kLow) - static_cast<std::int64_t>(back & kLow);
    }
  }
  return {high, low};
}

void check_symmetry_sums(std::span<const std::int64_t> sums, const std::string& name) {
  if (std::all_of(sums.begin(), sums.end(), [](std::int64_t s) { return s == 0; })) return;
  throw FormatError("dataset '" + name +
                    "': its adjacency is not symmetric: some edge (r, c) is stored without its "
                    "mirror (c, r) (a dataset stores each undirected edge both ways); load it in "
                    "one process (tessera-train without mpirun) to have the edge named");
}

} // namespace tessera::datasets
