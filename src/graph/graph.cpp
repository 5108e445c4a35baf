// Symmetric CSR construction, transposition, GCN normalization, degree statistics and column tiles.
#include "tessera/graph/graph.hpp"

#include <algorithm>
#include <omp.h>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera::graph {

namespace {

/// Exclusive prefix sum of counts[0..n) into offsets[0..n] (offsets[0] = 0).
void exclusive_scan(const std::vector<Offset>& counts, Offset* offsets) {
  offsets[0] = 0;
  std::inclusive_scan(counts.begin(), counts.end(), offsets + 1);
}

/// Index of the first edge with an endpoint outside [0, n), or -1.
std::int64_t first_bad_edge(const EdgeList& edges) {
  const std::int64_t n = edges.num_nodes;
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for reduction(min : first) schedule(static)
  for (std::int64_t e = 0; e < edges.size(); ++e) {
    const GlobalId u = edges.src[e], v = edges.dst[e];
    if (u < 0 || u >= n || v < 0 || v >= n) first = std::min(first, e);
  }
  return first == std::numeric_limits<std::int64_t>::max() ? -1 : first;
}

/// Bits needed for ids below n (at least 1).
int bits_for(std::int64_t n) {
  int bits = 1;
  while ((std::int64_t{1} << bits) < n) ++bits;
  return bits;
}

/// Sorts (row << 32 | col) keys whose row and col are below 2^id_bits: parallel LSD radix sort
/// on the 2·id_bits significant bits, 11 bits per pass, per-thread histograms.
void radix_sort(std::vector<std::uint64_t>& keys, int id_bits) {
  constexpr int kDigitBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kDigitBits;
  const auto size = static_cast<std::int64_t>(keys.size());
  std::vector<std::uint64_t> buffer(keys.size());
  // The significant bits: col bits [0, id_bits) and row bits [32, 32 + id_bits).
  std::vector<int> shifts;
  for (int bit = 0; bit < id_bits; bit += kDigitBits) shifts.push_back(bit);
  for (int bit = 0; bit < id_bits; bit += kDigitBits) shifts.push_back(32 + bit);
  const int threads = omp_get_max_threads();
  std::vector<std::size_t> offsets(kBuckets * threads);
  for (const int shift : shifts) {
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      const std::int64_t begin = size * t / threads, end = size * (t + 1) / threads;
      std::size_t* mine = offsets.data() + kBuckets * t;
      std::fill(mine, mine + kBuckets, 0);
      for (std::int64_t i = begin; i < end; ++i) ++mine[(keys[i] >> shift) & (kBuckets - 1)];
#pragma omp barrier
#pragma omp single
      {
        std::size_t total = 0;  // bucket-major, thread-minor: a stable scatter
        for (std::size_t b = 0; b < kBuckets; ++b) {
          for (int u = 0; u < threads; ++u) {
            const std::size_t c = offsets[kBuckets * u + b];
            offsets[kBuckets * u + b] = total;
            total += c;
          }
        }
      }
      for (std::int64_t i = begin; i < end; ++i) {
        buffer[mine[(keys[i] >> shift) & (kBuckets - 1)]++] = keys[i];
      }
    }
    keys.swap(buffer);
  }
}

}  // namespace

Csr build_symmetric_csr(const BackendPtr& backend, const EdgeList& edges, bool keep_self_loops) {
  const std::int64_t n = edges.num_nodes;
  if (edges.src.size() != edges.dst.size()) {
    throw InvalidArgument("edge list has " + std::to_string(edges.src.size()) + " sources but " +
                          std::to_string(edges.dst.size()) + " destinations");
  }
  if (n > std::numeric_limits<LocalId>::max()) {
    throw InvalidArgument("graph has " + std::to_string(n) +
                          " nodes; a single CSR holds at most 2^31 - 1 (partition it first)");
  }
  if (const std::int64_t e = first_bad_edge(edges); e >= 0) {
    throw InvalidArgument("edge " + std::to_string(e) + " (" + std::to_string(edges.src[e]) + ", " +
                          std::to_string(edges.dst[e]) + ") has an endpoint outside [0, " +
                          std::to_string(n) + ")");
  }

  // Both directions of every edge as (row << 32 | col) keys, radix-sorted: rows come out in
  // order with sorted columns, so duplicates are adjacent. Sorting beats scattering into rows
  // here because each radix pass streams through memory instead of missing the cache per edge.
  const std::int64_t m = edges.size();
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(2 * m));
#pragma omp parallel for schedule(static)
  for (std::int64_t e = 0; e < m; ++e) {
    const auto u = static_cast<std::uint64_t>(edges.src[e]);
    const auto v = static_cast<std::uint64_t>(edges.dst[e]);
    keys[2 * e] = u << 32 | v;
    keys[2 * e + 1] = v << 32 | u;
  }
  radix_sort(keys, bits_for(n));

  // Keep the first of each run of equal keys (and self-loops only when asked), then count rows.
  std::vector<Offset> count(n, 0);
  std::int64_t kept = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::uint64_t key = keys[i];
    const auto row = static_cast<std::int64_t>(key >> 32);
    const auto col = static_cast<std::int64_t>(key & 0xFFFFFFFFu);
    if ((i > 0 && keys[i - 1] == key) || (row == col && !keep_self_loops)) continue;
    keys[kept++] = key;
    ++count[row];
  }
  Csr out(backend, n, n, kept);
  exclusive_scan(count, out.row_ptr());
#pragma omp parallel for schedule(static)
  for (std::int64_t k = 0; k < kept; ++k) {
    out.col()[k] = static_cast<LocalId>(keys[k] & 0xFFFFFFFFu);
    out.val()[k] = 1.0f;
  }
  return out;
}

namespace {

/// Aᵀ by a counting sort; edge_of, when given, receives the A entry of each Aᵀ entry.
template <typename T> CsrT<T> transpose_into(const CsrT<T>& a, Offset* edge_of) {
  const std::int64_t rows = a.rows(), cols = a.cols();
  std::vector<Offset> count(cols, 0);
  for (std::int64_t k = 0; k < a.nnz(); ++k) ++count[a.col()[k]];
  CsrT<T> out(a.backend(), cols, rows, a.nnz());
  exclusive_scan(count, out.row_ptr());
  std::vector<Offset> cursor(out.row_ptr(), out.row_ptr() + cols);
  // Visiting rows in order leaves every output row sorted.
  for (std::int64_t r = 0; r < rows; ++r) {
    for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      const Offset dst = cursor[a.col()[k]]++;
      out.col()[dst] = static_cast<LocalId>(r);
      out.val()[dst] = a.val()[k];
      if (edge_of != nullptr) edge_of[dst] = k;
    }
  }
  return out;
}

} // namespace

template <typename T> CsrT<T> transpose(const CsrT<T>& a) {
  return transpose_into(a, static_cast<Offset*>(nullptr));
}

template <typename T> CsrT<T> transpose(const CsrT<T>& a, std::vector<Offset>& edge_of) {
  edge_of.resize(static_cast<std::size_t>(a.nnz()));
  return transpose_into(a, edge_of.data());
}

template CsrT<float> transpose(const CsrT<float>&);
template CsrT<float> transpose(const CsrT<float>&, std::vector<Offset>&);
template CsrT<double> transpose(const CsrT<double>&, std::vector<Offset>&);
template CsrT<double> transpose(const CsrT<double>&);

namespace {

/// Â from A: a unit self-loop is added at (r, r) of rows that lack one, and every value is
/// scaled by row_scale[r] · col_scale[c]. a: [m, n] with m <= n; row_scale: [>= m]; col_scale:
/// [n].
Csr normalize_with(const Csr& a, const std::vector<float>& row_scale,
                   const std::vector<float>& col_scale) {
  const std::int64_t m = a.rows();
  const Offset* rp = a.row_ptr();
  const LocalId* col = a.col();
  std::vector<Offset> count(m);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < m; ++r) {
    const bool has_loop = std::binary_search(col + rp[r], col + rp[r + 1], static_cast<LocalId>(r));
    count[r] = rp[r + 1] - rp[r] + (has_loop ? 0 : 1);
  }

  Csr out(a.backend(), m, a.cols(), std::accumulate(count.begin(), count.end(), Offset{0}));
  exclusive_scan(count, out.row_ptr());
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < m; ++r) {
    Offset dst = out.row_ptr()[r];
    bool placed_loop = false;
    const auto emit = [&](LocalId c, float v) {
      out.col()[dst] = c;
      out.val()[dst] = v * row_scale[r] * col_scale[c];
      ++dst;
    };
    for (Offset k = rp[r]; k < rp[r + 1]; ++k) {
      if (!placed_loop && col[k] >= r) {
        if (col[k] != r) emit(static_cast<LocalId>(r), 1.0f);
        placed_loop = true;
      }
      emit(col[k], a.val()[k]);
    }
    if (!placed_loop) emit(static_cast<LocalId>(r), 1.0f);
  }
  return out;
}

float inv_sqrt(double degree) {
  return degree > 0.0 ? static_cast<float>(1.0 / std::sqrt(degree)) : 0.0f;
}

}  // namespace

Csr gcn_normalize(const Csr& a) {
  if (a.rows() != a.cols()) {
    throw DimensionMismatch("gcn_normalize needs a square adjacency, got " + a.shape());
  }
  const std::int64_t n = a.rows();
  const Offset* rp = a.row_ptr();
  const LocalId* col = a.col();

  // Degrees of A + I: row sums of A plus the self-loop a row lacks.
  std::vector<float> inv_sqrt_degree(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    const bool has_loop = std::binary_search(col + rp[r], col + rp[r + 1], static_cast<LocalId>(r));
    double degree = has_loop ? 0.0 : 1.0;
    for (Offset k = rp[r]; k < rp[r + 1]; ++k) degree += a.val()[k];
    inv_sqrt_degree[r] = inv_sqrt(degree);
  }
  return normalize_with(a, inv_sqrt_degree, inv_sqrt_degree);
}

Csr gcn_normalize_tile(const Csr& a, std::span<const std::int64_t> degree) {
  if (a.rows() > a.cols() || static_cast<std::int64_t>(degree.size()) != a.cols()) {
    throw DimensionMismatch("gcn_normalize_tile: rows " + a.shape() + " with " +
                            std::to_string(degree.size()) + " degrees; need rows <= columns and "
                            "one degree per column");
  }
  std::vector<float> inv_sqrt_degree(degree.size());
  for (std::size_t c = 0; c < degree.size(); ++c)
    inv_sqrt_degree[c] = inv_sqrt(static_cast<double>(degree[c]) + 1.0);
  return normalize_with(a, inv_sqrt_degree, inv_sqrt_degree);
}

Csr gcn_normalize_block(const Csr& a) {
  if (a.rows() > a.cols()) {
    throw DimensionMismatch("gcn_normalize_block: a block has no more destinations than sources, "
                            "got " +
                            a.shape());
  }
  // Degrees of A + I within the block: a destination's entries, a source's destinations.
  std::vector<std::int64_t> in(static_cast<std::size_t>(a.rows())),
      out(static_cast<std::size_t>(a.cols()), 0);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const Offset begin = a.row_ptr()[r], end = a.row_ptr()[r + 1];
    const bool has_loop =
        std::binary_search(a.col() + begin, a.col() + end, static_cast<LocalId>(r));
    in[static_cast<std::size_t>(r)] = end - begin + (has_loop ? 0 : 1);
    if (!has_loop) ++out[static_cast<std::size_t>(r)];
    for (Offset k = begin; k < end; ++k)
      ++out[static_cast<std::size_t>(a.col()[k])];
  }
  std::vector<float> row_scale(in.size()), col_scale(out.size());
  for (std::size_t r = 0; r < in.size(); ++r)
    row_scale[r] = inv_sqrt(static_cast<double>(in[r]));
  for (std::size_t c = 0; c < out.size(); ++c)
    col_scale[c] = inv_sqrt(static_cast<double>(out[c]));
  return normalize_with(a, row_scale, col_scale);
}

namespace {

/// A's rows without their self-loops (the entry (r, r)), each remaining entry set to 1 / the
/// row's count (`mean`) or 1. A: [n, m] with n <= m (a tile's rows: owned ids come first).
Csr unit_rows_without_self_loops(const Csr& a, bool mean, const char* what) {
  if (a.rows() > a.cols()) {
    throw DimensionMismatch(std::string(what) + " needs rows <= columns (a square adjacency or a "
                            "tile's owned rows), got " + a.shape());
  }
  const std::int64_t n = a.rows();
  const Offset* rp = a.row_ptr();
  const LocalId* col = a.col();
  std::vector<Offset> count(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    count[r] = rp[r + 1] - rp[r] -
               (std::binary_search(col + rp[r], col + rp[r + 1], static_cast<LocalId>(r)) ? 1 : 0);
  }
  Csr out(a.backend(), n, a.cols(), std::accumulate(count.begin(), count.end(), Offset{0}));
  exclusive_scan(count, out.row_ptr());
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    Offset dst = out.row_ptr()[r];
    const float value =
        !mean ? 1.0f : (count[r] > 0 ? 1.0f / static_cast<float>(count[r]) : 0.0f);
    for (Offset k = rp[r]; k < rp[r + 1]; ++k) {
      if (col[k] == r) continue;
      out.col()[dst] = col[k];
      out.val()[dst++] = value;
    }
  }
  return out;
}

} // namespace

Csr mean_aggregation(const Csr& a) { return unit_rows_without_self_loops(a, true, "mean_aggregation"); }

Csr sum_aggregation(const Csr& a) { return unit_rows_without_self_loops(a, false, "sum_aggregation"); }

bool is_symmetric(const Csr& a) {
  if (a.rows() != a.cols()) return false;
  const Offset* rp = a.row_ptr();
  const LocalId* col = a.col();
  bool symmetric = true;
#pragma omp parallel for reduction(&& : symmetric) schedule(static)
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset k = rp[r]; k < rp[r + 1] && symmetric; ++k) {
      const LocalId c = col[k];
      const LocalId* hit = std::lower_bound(col + rp[c], col + rp[c + 1], static_cast<LocalId>(r));
      symmetric = hit != col + rp[c + 1] && *hit == r && a.val()[hit - col] == a.val()[k];
    }
  }
  return symmetric;
}

DegreeStats degree_stats(const Csr& a) {
  DegreeStats stats;
  const std::int64_t n = a.rows();
  if (n == 0) return stats;
  std::vector<std::int64_t> degree(n);
  for (std::int64_t r = 0; r < n; ++r) degree[r] = a.row_ptr()[r + 1] - a.row_ptr()[r];
  const auto [lo, hi] = std::minmax_element(degree.begin(), degree.end());
  stats.min = *lo;
  stats.max = *hi;
  stats.mean = static_cast<double>(a.nnz()) / static_cast<double>(n);
  stats.isolated = std::count(degree.begin(), degree.end(), 0);
  std::nth_element(degree.begin(), degree.begin() + n / 2, degree.end());
  stats.median = degree[n / 2];
  return stats;
}

namespace {

/// Throws InvalidArgument unless bounds runs from 0 to cols without going down.
void check_column_bounds(std::span<const std::int64_t> bounds, std::int64_t cols) {
  const auto bad = [&](std::size_t i, const std::string& why) {
    throw InvalidArgument("column tiles: bounds[" + std::to_string(i) +
                          "] = " + std::to_string(bounds[i]) + " " + why);
  };
  if (bounds.size() < 2) {
    throw InvalidArgument("column tiles: bounds has " + std::to_string(bounds.size()) +
                          " entries; need at least 2 (0 and the column count " +
                          std::to_string(cols) + ")");
  }
  if (bounds.front() != 0) bad(0, "must be 0 (the first column tile starts at column 0)");
  for (std::size_t i = 1; i < bounds.size(); ++i) {
    if (bounds[i] < bounds[i - 1]) {
      bad(i, "is below bounds[" + std::to_string(i - 1) + "] = " + std::to_string(bounds[i - 1]) +
                 "; bounds must be ascending");
    }
  }
  if (bounds.back() != cols) {
    bad(bounds.size() - 1, "must equal the column count " + std::to_string(cols) +
                               " (the last column tile ends at the last column)");
  }
}

} // namespace

template <typename T>
CsrT<T> column_tile(const CsrT<T>& s, std::span<const std::int64_t> bounds, std::size_t tile) {
  check_column_bounds(bounds, s.cols());
  if (tile + 1 >= bounds.size()) {
    throw InvalidArgument("column_tile: tile " + std::to_string(tile) + " of " +
                          std::to_string(bounds.size() - 1) + " column tiles");
  }
  const std::int64_t begin = bounds[tile], end = bounds[tile + 1];
  const std::int64_t n = s.rows();
  const Offset* rp = s.row_ptr();
  const LocalId* col = s.col();
  const auto inside = [&](LocalId c) { return c >= begin && c < end; };

  // Entries per row, then the tile allocated at its size: two passes over S.
  std::vector<Offset> count(static_cast<std::size_t>(n), 0);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    for (Offset k = rp[r]; k < rp[r + 1]; ++k)
      count[r] += inside(col[k]) ? 1 : 0;
  }
  CsrT<T> out(s.backend(), n, s.cols(), std::accumulate(count.begin(), count.end(), Offset{0}));
  exclusive_scan(count, out.row_ptr());
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    Offset d = out.row_ptr()[r];
    for (Offset k = rp[r]; k < rp[r + 1]; ++k) {
      if (!inside(col[k])) continue;
      out.col()[d] = col[k];
      out.val()[d++] = s.val()[k];
    }
  }
  return out;
}

template <typename T>
std::vector<CsrT<T>> split_columns(const CsrT<T>& s, std::span<const std::int64_t> bounds) {
  check_column_bounds(bounds, s.cols());
  std::vector<CsrT<T>> out;
  for (std::size_t t = 0; t + 1 < bounds.size(); ++t)
    out.push_back(column_tile(s, bounds, t));
  return out;
}

template CsrT<float> column_tile(const CsrT<float>&, std::span<const std::int64_t>, std::size_t);
template CsrT<double> column_tile(const CsrT<double>&, std::span<const std::int64_t>, std::size_t);
template std::vector<CsrT<float>> split_columns(const CsrT<float>&, std::span<const std::int64_t>);
template std::vector<CsrT<double>> split_columns(const CsrT<double>&,
                                                 std::span<const std::int64_t>);

}  // namespace tessera::graph
