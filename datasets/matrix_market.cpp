// Matrix Market coordinate files read as graphs: entry (i, j) is an edge, values are ignored.
#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/text_input.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace tessera::datasets::detail {

namespace {

constexpr std::int64_t kMaxReserve = std::int64_t{1} << 22;

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

/// Number of value fields after "i j" on each entry line, from the banner's field type.
std::size_t parse_banner(const io::LineReader& in, std::string_view line) {
  std::vector<std::string_view> banner;
  io::split_whitespace(line, banner);
  if (banner.size() != 5 || lower(banner[0]) != "%%matrixmarket" || lower(banner[1]) != "matrix") {
    in.fail("expected the banner '%%MatrixMarket matrix coordinate <field> <symmetry>', found " +
            io::quote(line));
  }
  if (lower(banner[2]) != "coordinate") {
    in.fail("expected a sparse 'coordinate' matrix, found " + io::quote(banner[2]) +
            " (dense arrays are not graphs)");
  }
  const std::string field = lower(banner[3]);
  const std::string symmetry = lower(banner[4]);
  if (symmetry != "general" && symmetry != "symmetric" && symmetry != "skew-symmetric") {
    in.fail("expected symmetry general, symmetric or skew-symmetric, found " +
            io::quote(banner[4]));
  }
  if (field == "pattern") return 0;
  if (field == "real" || field == "integer" || field == "double") return 1;
  in.fail("expected field pattern, real or integer, found " + io::quote(banner[3]));
}

} // namespace

Dataset load_matrix_market(const BackendPtr& backend, const std::string& path) {
  Dataset ds = dataset_for_file(backend, path);
  io::LineReader in(path);
  std::string_view line;
  std::vector<std::string_view> fields;
  if (!in.next(line)) throw FormatError(path + ": empty file, expected a %%MatrixMarket banner");
  const std::size_t num_values = parse_banner(in, line);

  const auto next_data_line = [&] { return io::next_content_line(in, line, "%"); };
  if (!next_data_line()) throw FormatError(path + ": expected the size line 'rows cols entries'");
  io::split_whitespace(line, fields);
  if (fields.size() != 3)
    in.fail("expected the size line 'rows cols entries', found " + io::quote(line));
  const std::int64_t rows = io::parse_int(in, fields[0], "the row count");
  const std::int64_t cols = io::parse_int(in, fields[1], "the column count");
  const std::int64_t entries = io::parse_int(in, fields[2], "the entry count");
  if (rows != cols) {
    in.fail("a graph needs a square matrix, found " + std::to_string(rows) + " x " +
            std::to_string(cols));
  }
  if (rows < 0 || entries < 0) in.fail("negative sizes in " + io::quote(line));
  check_node_count(rows, path);
  // Both counts are numbers in the file, not data: bound them by what the file can hold before
  // anything is sized by them. An entry line takes at least 4 bytes ("1 1\n").
  const std::int64_t max_entries = in.max_records(4 + 2 * static_cast<std::int64_t>(num_values));
  if (entries > max_entries) {
    in.fail("the size line promises " + std::to_string(entries) + " entries, but the file can " +
            "hold at most " + std::to_string(max_entries) + " (an entry line takes at least " +
            std::to_string(4 + 2 * num_values) + " bytes)");
  }
  // min(): rows < 2^31, so the bound cannot overflow.
  if (rows > max_node_count(2 * std::min(entries, rows))) {
    in.fail("the size line declares " + std::to_string(rows) + " rows for " +
            std::to_string(entries) + " entries, which touch at most " +
            std::to_string(2 * entries) + " rows; a graph may have at most 2 x touched + 1024 = " +
            std::to_string(max_node_count(2 * entries)) + " nodes");
  }

  graph::EdgeList edges;
  edges.num_nodes = rows;
  // A gzip'd file or a stream bounds `entries` only loosely: reserve a part, grow as read.
  const auto expected = static_cast<std::size_t>(std::min(entries, kMaxReserve));
  edges.src.reserve(expected);
  edges.dst.reserve(expected);
  while (edges.size() < entries && next_data_line()) {
    io::split_whitespace(line, fields);
    if (fields.size() != 2 + num_values) {
      in.fail("expected " + std::to_string(2 + num_values) + " fields (row, column" +
              (num_values > 0 ? ", value" : "") + "), found " + std::to_string(fields.size()));
    }
    std::int64_t ends[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      ends[k] = io::parse_int(in, fields[k], k == 0 ? "a row index" : "a column index");
      if (ends[k] < 1 || ends[k] > rows) {
        in.fail("index " + std::to_string(ends[k]) + " is outside [1, " + std::to_string(rows) +
                "]");
      }
    }
    if (num_values > 0) {
      // Values are not kept (edges weigh 1), but a NaN or infinite one means corrupt data.
      const double value = io::parse_double(in, fields[2], "a value");
      if (!std::isfinite(static_cast<float>(value))) {
        in.fail("value " + io::quote(fields[2]) + " of entry (" + std::to_string(ends[0]) + ", " +
                std::to_string(ends[1]) + ") " + io::not_finite_reason(value));
      }
    }
    edges.add(ends[0] - 1, ends[1] - 1);
  }
  if (edges.size() < entries) {
    throw FormatError(path + ": the size line promises " + std::to_string(entries) +
                      " entries, the file holds " + std::to_string(edges.size()));
  }
  if (next_data_line()) {
    in.fail("expected the end of the file after " + std::to_string(entries) + " entries, found " +
            io::quote(line));
  }
  ds.num_nodes = rows;
  ds.adjacency = graph::build_symmetric_csr(backend, edges);
  check_loaded(ds, {.edges = path});
  return ds;
}

} // namespace tessera::datasets::detail
