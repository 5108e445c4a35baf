// SNAP edge lists ("src dst" per line, '#' comments) and the email-Eu-core department labels.
#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/text_input.hpp"

#include <algorithm>
#include <limits>
#include <span>

namespace tessera::datasets::detail {

namespace {

/// What starts a comment line in SNAP files (# in the published ones, % in KONECT-style).
constexpr std::string_view kCommentMarks = "#%";

constexpr std::int64_t kMaxNodeId = std::numeric_limits<LocalId>::max() - 1;

/// A node id field: a non-negative integer that a CSR column can hold.
std::int64_t parse_node_id(const io::LineReader& in, std::string_view field) {
  const std::int64_t id = io::parse_int(in, field, "a node id");
  if (id < 0 || id > kMaxNodeId) {
    in.fail("node id " + std::to_string(id) + " is outside [0, " + std::to_string(kMaxNodeId) +
            "]");
  }
  return id;
}

/// The largest node id of a file and where it was read.
struct LargestId {
  std::int64_t id = -1;
  std::int64_t line = 0;
  const std::string* path = nullptr; // the reader's, which outlives this

  void see(std::int64_t candidate, const io::LineReader& in) {
    if (candidate > id) *this = {candidate, in.line_number(), &in.path()};
  }
};

/// The number of distinct values in `lists`, all in [0, largest]. Memory stays proportional to
/// the values: a bitmap when it is small next to them, a sorted copy otherwise.
std::int64_t count_distinct(std::initializer_list<std::span<const std::int64_t>> lists,
                            std::int64_t largest) {
  std::size_t total = 0;
  for (const auto& list : lists)
    total += list.size();
  if (static_cast<std::uint64_t>(largest) < 64 * static_cast<std::uint64_t>(total) + 64) {
    std::vector<bool> seen(static_cast<std::size_t>(largest) + 1, false);
    std::int64_t distinct = 0;
    for (const auto& list : lists) {
      for (const auto id : list) {
        if (!seen[id]) {
          seen[id] = true;
          ++distinct;
        }
      }
    }
    return distinct;
  }
  std::vector<std::int64_t> all;
  all.reserve(total);
  for (const auto& list : lists)
    all.insert(all.end(), list.begin(), list.end());
  std::sort(all.begin(), all.end());
  return std::unique(all.begin(), all.end()) - all.begin();
}

/// The node count of ids numbered by themselves: largest + 1, refused when that is beyond
/// max_node_count of the distinct ids (a lone huge id would size every array by it).
std::int64_t dense_node_count(const LargestId& largest, std::int64_t distinct,
                              const std::string& counted_in) {
  const std::int64_t allowed = max_node_count(distinct);
  if (largest.id + 1 > allowed) {
    throw FormatError(
        "id " + std::to_string(largest.id) + " on line " + std::to_string(largest.line) + " of " +
        *largest.path + ", but " + counted_in + " " + std::to_string(distinct) +
        " distinct ids: node ids number the rows, so they must be nearly dense "
        "(the largest below 2 x distinct + 1024 = " +
        std::to_string(allowed) + "); renumber them 0.." + std::to_string(distinct - 1));
  }
  return largest.id + 1;
}

} // namespace

graph::EdgeList read_snap_edges(const std::string& path) {
  graph::EdgeList edges;
  LargestId largest;
  std::vector<std::string_view> fields;
  io::LineReader in(path);
  std::string_view line;
  while (io::next_content_line(in, line, kCommentMarks)) {
    io::split_whitespace(line, fields);
    if (fields.size() < 2) {
      in.fail("expected two node ids 'src dst', found " + io::quote(line));
    }
    const std::int64_t u = parse_node_id(in, fields[0]);
    const std::int64_t v = parse_node_id(in, fields[1]);
    edges.add(u, v);
    largest.see(std::max(u, v), in);
  }
  if (edges.size() == 0) {
    throw FormatError(path + ": no edges (expected 'src dst' lines after the '#' comments)");
  }
  // Ids are kept as they are (labels files refer to them), so isolated ids become empty rows;
  // the node count is bounded by the distinct ids, never by the largest number alone.
  edges.num_nodes =
      dense_node_count(largest, count_distinct({edges.src, edges.dst}, largest.id), "the file has");
  return edges;
}

Dataset load_snap(const BackendPtr& backend, const std::string& path) {
  Dataset ds = dataset_for_file(backend, path);
  const graph::EdgeList edges = read_snap_edges(path);
  ds.num_nodes = edges.num_nodes;
  ds.adjacency = graph::build_symmetric_csr(backend, edges);
  check_loaded(ds, {.edges = path});
  return ds;
}

Dataset load_email_eu_core(const BackendPtr& backend, const std::string& edges_path,
                           const std::string& labels_path) {
  require_host(backend);
  Dataset ds;
  ds.name = "email-eu-core";
  graph::EdgeList edges = read_snap_edges(edges_path);

  struct Record {
    std::int64_t node;
    std::int32_t department;
    std::int64_t line;
  };
  std::vector<Record> records;
  std::vector<std::string_view> fields;
  io::LineReader in(labels_path);
  std::string_view line;
  while (io::next_content_line(in, line, kCommentMarks)) {
    io::split_whitespace(line, fields);
    if (fields.size() != 2) {
      in.fail("expected 'node department', found " + std::to_string(fields.size()) + " fields");
    }
    const std::int64_t node = parse_node_id(in, fields[0]);
    const std::int64_t dept = io::parse_int(in, fields[1], "a department id");
    if (dept < 0 || dept > std::numeric_limits<std::int32_t>::max()) {
      in.fail("department " + std::to_string(dept) + " is not a class id (expected >= 0)");
    }
    // The edge list makes the graph: a label of a node it does not have would add a node (and
    // an invented feature row) that no edge file holds.
    if (node >= edges.num_nodes) {
      in.fail("node " + std::to_string(node) + " is not in the graph: " + edges_path + " has " +
              std::to_string(edges.num_nodes) + " nodes (ids 0.." +
              std::to_string(edges.num_nodes - 1) + "); a labels file may name only those");
    }
    records.push_back({node, static_cast<std::int32_t>(dept), in.line_number()});
  }
  ds.num_nodes = edges.num_nodes;
  ds.labels.assign(static_cast<std::size_t>(ds.num_nodes), -1);
  for (const auto& r : records) {
    if (ds.labels[r.node] >= 0) {
      throw FormatError(labels_path + ":" + std::to_string(r.line) + ": node " +
                        std::to_string(r.node) + " is labelled a second time");
    }
    ds.labels[r.node] = r.department;
  }
  std::vector<std::int64_t> line_of_node(static_cast<std::size_t>(ds.num_nodes), 0);
  for (const auto& r : records)
    line_of_node[r.node] = r.line;
  ds.num_classes = count_classes(ds.labels, labels_path, [&](std::int64_t node) {
    return "line " + std::to_string(line_of_node[node]) + " (node " + std::to_string(node) + ")";
  });
  ds.adjacency = graph::build_symmetric_csr(backend, edges);
  ds.features.sparse = identity_features(backend, ds.num_nodes);
  ds.origin.features = edges_path + " (one-hot identity features: one column per node)";
  check_loaded(ds, {.features = labels_path, .edges = edges_path, .labels = labels_path});
  return ds;
}

} // namespace tessera::datasets::detail
