// Graphs in METIS format: an "n m [fmt [ncon]]" header, then the 1-based neighbours of vertex i
// on line i (blank for an isolated vertex); lines starting with '%' are comments.
#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/text_input.hpp"

#include <algorithm>

namespace tessera::datasets::detail {

namespace {

/// What each vertex line holds besides neighbour ids, from the header's fmt and ncon fields.
struct VertexLineLayout {
  bool has_size = false;         // fmt 1xx: vertex size first
  std::int64_t num_weights = 0;  // fmt x1x: ncon vertex weights next
  bool has_edge_weights = false; // fmt xx1: a weight after every neighbour
};

VertexLineLayout parse_layout(const io::LineReader& in,
                              const std::vector<std::string_view>& header) {
  VertexLineLayout layout;
  if (header.size() < 3) return layout;
  const std::string_view fmt = header[2];
  if (fmt.size() > 3 || fmt.find_first_not_of("01") != std::string_view::npos) {
    in.fail("expected fmt of at most three 0/1 digits (vertex sizes, vertex weights, edge "
            "weights), found " +
            io::quote(fmt));
  }
  const std::string digits = std::string(3 - fmt.size(), '0') + std::string(fmt);
  layout.has_size = digits[0] == '1';
  layout.has_edge_weights = digits[2] == '1';
  if (digits[1] == '1') {
    layout.num_weights =
        header.size() >= 4 ? io::parse_int(in, header[3], "ncon, the number of vertex weights") : 1;
    if (layout.num_weights < 1) in.fail("ncon must be at least 1, found " + std::string(header[3]));
  }
  return layout;
}

} // namespace

Dataset load_metis_graph(const BackendPtr& backend, const std::string& path) {
  Dataset ds = dataset_for_file(backend, path);
  io::LineReader in(path);
  std::string_view line;
  std::vector<std::string_view> fields;

  if (!io::next_content_line(in, line, "%"))
    throw FormatError(path + ": empty file, expected the header 'n m [fmt [ncon]]'");
  io::split_whitespace(line, fields);
  if (fields.size() < 2 || fields.size() > 4) {
    in.fail("expected the header 'n m [fmt [ncon]]', found " + io::quote(line));
  }
  const std::int64_t n = io::parse_int(in, fields[0], "the vertex count n");
  const std::int64_t m = io::parse_int(in, fields[1], "the edge count m");
  if (n < 0 || m < 0)
    in.fail("vertex and edge counts must be non-negative, found " + io::quote(line));
  check_node_count(n, path);
  // n and m are numbers in the header: bound them by what the file can hold before anything is
  // sized by them. A vertex line takes at least 1 byte ("\n"), a neighbour at least 2 ("1 ").
  if (n > in.max_records(1)) {
    in.fail("the header promises " + std::to_string(n) + " vertices, but the file can hold at " +
            "most " + std::to_string(in.max_records(1)) + " vertex lines");
  }
  if (m > in.max_records(2) / 2) {
    in.fail("the header promises " + std::to_string(m) + " edges, but the file can hold at most " +
            std::to_string(in.max_records(2)) + " neighbour ids (each edge is listed twice)");
  }
  const VertexLineLayout layout = parse_layout(in, fields);
  const std::size_t skip = (layout.has_size ? 1 : 0) + static_cast<std::size_t>(layout.num_weights);
  const std::size_t stride = layout.has_edge_weights ? 2 : 1;

  graph::EdgeList edges;
  edges.num_nodes = n;
  // A gzip'd file or a stream bounds m only loosely: reserve a part, grow as read.
  constexpr std::int64_t kMaxReserve = std::int64_t{1} << 22;
  edges.src.reserve(static_cast<std::size_t>(std::min(2 * m, kMaxReserve)));
  edges.dst.reserve(static_cast<std::size_t>(std::min(2 * m, kMaxReserve)));
  std::int64_t vertex = 0;
  while (vertex < n && in.next(line)) {
    if (io::is_comment(line, "%")) continue;
    io::split_whitespace(line, fields);
    if (fields.size() < skip || (fields.size() - skip) % stride != 0) {
      in.fail("expected " + std::string(layout.has_size ? "a vertex size, " : "") +
              std::to_string(layout.num_weights) + " vertex weight(s) and " +
              (layout.has_edge_weights ? "(neighbour, weight) pairs" : "neighbour ids") +
              " for vertex " + std::to_string(vertex + 1) + ", found " +
              std::to_string(fields.size()) + " fields");
    }
    // Sizes and weights are not used (edges weigh 1 in a Dataset), but they are the file's: a
    // field that is not one is a file that is not what its header says.
    for (std::size_t k = 0; k < skip; ++k) {
      const bool size = layout.has_size && k == 0;
      const std::int64_t value =
          io::parse_int(in, fields[k], size ? "a vertex size" : "a vertex weight");
      if (value < 0) {
        in.fail(std::string(size ? "vertex size " : "vertex weight ") + std::to_string(value) +
                " of vertex " + std::to_string(vertex + 1) + " is negative");
      }
    }
    for (std::size_t k = skip; k < fields.size(); k += stride) {
      const std::int64_t neighbour = io::parse_int(in, fields[k], "a neighbour id");
      if (neighbour < 1 || neighbour > n) {
        in.fail("neighbour " + std::to_string(neighbour) + " of vertex " +
                std::to_string(vertex + 1) + " is outside [1, " + std::to_string(n) + "]");
      }
      if (neighbour == vertex + 1) {
        in.fail("vertex " + std::to_string(vertex + 1) +
                " lists itself: a METIS graph holds no self-loops");
      }
      if (layout.has_edge_weights) {
        const std::int64_t weight = io::parse_int(in, fields[k + 1], "an edge weight");
        if (weight < 1) {
          in.fail("edge weight " + std::to_string(weight) + " of (" + std::to_string(vertex + 1) +
                  ", " + std::to_string(neighbour) + ") is not positive");
        }
      }
      edges.add(vertex, neighbour - 1);
    }
    ++vertex;
  }
  if (vertex < n) {
    throw FormatError(path + ": expected " + std::to_string(n) +
                      " vertex lines after the header, "
                      "found " +
                      std::to_string(vertex) + " (the file ends at line " +
                      std::to_string(in.line_number()) + ")");
  }
  if (io::next_content_line(in, line, "%")) {
    in.fail("expected the end of the file after " + std::to_string(n) + " vertex lines, found " +
            io::quote(line));
  }
  if (edges.size() != 2 * m) {
    throw FormatError(path + ": the header promises " + std::to_string(m) + " edges (" +
                      std::to_string(2 * m) + " adjacency entries), the vertex lines hold " +
                      std::to_string(edges.size()));
  }
  ds.num_nodes = n;
  ds.adjacency = graph::build_symmetric_csr(backend, edges);
  check_loaded(ds, {.edges = path});
  return ds;
}

} // namespace tessera::datasets::detail
