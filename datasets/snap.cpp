// SNAP edge lists ("src dst" per line, '#' comments) and the email-Eu-core department labels.
#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/io/text_input.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <limits>

namespace tessera::datasets::detail {

namespace {

constexpr std::int64_t kMaxNodeId = std::numeric_limits<LocalId>::max() - 1;

bool is_comment(std::string_view line) noexcept {
  return !line.empty() && (line.front() == '#' || line.front() == '%');
}

/// A node id field: a non-negative integer that a CSR column can hold.
std::int64_t parse_node_id(const io::LineReader& in, std::string_view field) {
  const std::int64_t id = io::parse_int(in, field, "a node id");
  if (id < 0 || id > kMaxNodeId) {
    in.fail("node id " + std::to_string(id) + " is outside [0, " + std::to_string(kMaxNodeId) +
            "]");
  }
  return id;
}

} // namespace

graph::EdgeList read_snap_edges(const std::string& path) {
  graph::EdgeList edges;
  std::int64_t largest = -1;
  std::vector<std::string_view> fields;
  io::LineReader in(path);
  std::string_view line;
  while (in.next(line)) {
    if (is_comment(line) || io::is_blank(line)) continue;
    io::split_whitespace(line, fields);
    if (fields.size() < 2) {
      in.fail("expected two node ids 'src dst', found " + io::quote(line));
    }
    const std::int64_t u = parse_node_id(in, fields[0]);
    const std::int64_t v = parse_node_id(in, fields[1]);
    edges.add(u, v);
    largest = std::max({largest, u, v});
  }
  if (edges.size() == 0) {
    throw FormatError(path + ": no edges (expected 'src dst' lines after the '#' comments)");
  }
  // Ids are kept as they are (labels files refer to them), so isolated ids become empty rows.
  edges.num_nodes = largest + 1;
  return edges;
}

Dataset load_snap(const BackendPtr& backend, const std::string& path) {
  require_host(backend);
  Dataset ds;
  ds.name = name_from_path(path);
  const graph::EdgeList edges = read_snap_edges(path);
  ds.num_nodes = edges.num_nodes;
  ds.adjacency = graph::build_symmetric_csr(backend, edges);
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
  while (in.next(line)) {
    if (is_comment(line) || io::is_blank(line)) continue;
    io::split_whitespace(line, fields);
    if (fields.size() != 2) {
      in.fail("expected 'node department', found " + std::to_string(fields.size()) + " fields");
    }
    const std::int64_t node = parse_node_id(in, fields[0]);
    const std::int64_t dept = io::parse_int(in, fields[1], "a department id");
    if (dept < 0 || dept > std::numeric_limits<std::int32_t>::max()) {
      in.fail("department " + std::to_string(dept) + " is not a class id (expected >= 0)");
    }
    records.push_back({node, static_cast<std::int32_t>(dept), in.line_number()});
  }
  for (const auto& r : records)
    edges.num_nodes = std::max(edges.num_nodes, r.node + 1);
  ds.num_nodes = edges.num_nodes;
  ds.labels.assign(static_cast<std::size_t>(ds.num_nodes), -1);
  for (const auto& r : records) {
    if (ds.labels[r.node] >= 0) {
      throw FormatError(labels_path + ":" + std::to_string(r.line) + ": node " +
                        std::to_string(r.node) + " is labelled a second time");
    }
    ds.labels[r.node] = r.department;
  }
  ds.num_classes = count_classes(ds.labels);
  ds.adjacency = graph::build_symmetric_csr(backend, edges);
  ds.features.sparse = identity_features(backend, ds.num_nodes);
  return ds;
}

} // namespace tessera::datasets::detail
