// MUSAE social graphs (Rozemberczki et al.): <prefix>_edges.csv, <prefix>_target.csv (label in the
// last column) and <prefix>.json (sparse binary features as lists of feature ids per node).
#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/text_input.hpp"

#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

namespace tessera::datasets::detail {

namespace {} // namespace

MusaePaths musae_paths(const std::string& edges_path) {
  std::string prefix = edges_path;
  if (prefix.ends_with(".gz")) prefix.resize(prefix.size() - 3);
  constexpr std::string_view kSuffix = "_edges.csv";
  if (!prefix.ends_with(kSuffix)) {
    throw InvalidArgument("musae: expected the edges file '<prefix>_edges.csv[.gz]', got '" +
                          edges_path + "'");
  }
  prefix.resize(prefix.size() - kSuffix.size());
  return {edges_path, io::first_existing({prefix + "_target.csv", prefix + "_target.csv.gz"}),
          io::first_existing({prefix + ".json", prefix + ".json.gz"})};
}

namespace {

/// The fields of one CSV record (RFC 4180): a field in double quotes may hold commas and doubled
/// quotes (""), which stand for one. An unterminated quote, or text after a closing quote, is
/// refused naming the line.
void split_csv(const io::LineReader& in, std::string_view line, std::vector<std::string>& fields) {
  fields.assign(1, std::string());
  std::size_t i = 0;
  bool quoted_field = false;
  while (i < line.size()) {
    const char c = line[i];
    if (c == ',') {
      fields.emplace_back();
      quoted_field = false;
      ++i;
    } else if (c == '"' && fields.back().empty() && !quoted_field) {
      quoted_field = true;
      const std::size_t open = i++;
      while (true) {
        if (i >= line.size()) {
          in.fail("the quote at column " + std::to_string(open + 1) + " is never closed");
        }
        if (line[i] == '"' && i + 1 < line.size() && line[i + 1] == '"') {
          fields.back().push_back('"');
          i += 2;
        } else if (line[i] == '"') {
          ++i;
          break;
        } else {
          fields.back().push_back(line[i++]);
        }
      }
      if (i < line.size() && line[i] != ',') {
        in.fail("text after the closing quote at column " + std::to_string(i) + ": " +
                io::quote(line));
      }
    } else {
      fields.back().push_back(c);
      ++i;
    }
  }
}

/// Class name per node from "id,...,label" lines after a header (CSV: a quoted label may hold
/// commas); node ids must be 0..N-1 for N rows, so the node count comes from the rows, never
/// from an id.
std::vector<std::string> read_targets(const std::string& path) {
  struct Row {
    std::int64_t id;
    std::string label;
    std::int64_t line;
  };
  std::vector<Row> rows;
  io::LineReader in(path);
  std::string_view line;
  std::vector<std::string> fields;
  bool header = true;
  while (in.next(line)) {
    if (io::is_blank(line)) continue;
    split_csv(in, line, fields);
    if (header) {
      if (fields.front() != "id") {
        in.fail("expected the header 'id,...,<label column>', found " + io::quote(line));
      }
      header = false;
      continue;
    }
    if (fields.size() < 2) in.fail("expected 'id,...,label', found " + io::quote(line));
    const std::int64_t id = io::parse_int(in, fields.front(), "a node id");
    if (fields.back().empty()) in.fail("empty label in the last column");
    rows.push_back({id, std::move(fields.back()), in.line_number()});
  }
  const auto num_nodes = static_cast<std::int64_t>(rows.size());
  std::vector<std::string> name_of_node(rows.size());
  std::vector<std::int64_t> line_of_node(rows.size(), 0);
  for (auto& row : rows) {
    if (row.id < 0 || row.id >= num_nodes) {
      throw FormatError(path + ":" + std::to_string(row.line) + ": node id " +
                        std::to_string(row.id) + " is outside [0, " + std::to_string(num_nodes) +
                        "): the file has " + std::to_string(num_nodes) +
                        " rows, so ids must be 0.." + std::to_string(num_nodes - 1));
    }
    if (line_of_node[row.id] != 0) {
      throw FormatError(path + ":" + std::to_string(row.line) + ": node " + std::to_string(row.id) +
                        " already has a row at line " + std::to_string(line_of_node[row.id]));
    }
    name_of_node[row.id] = std::move(row.label);
    line_of_node[row.id] = row.line;
  }
  // With N rows of ids in [0, N) and no repeats, every id has its row.
  return name_of_node;
}

Csr read_feature_lists(const BackendPtr& backend, const std::string& path, std::int64_t num_nodes) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(io::read_text_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw FormatError(path + ": invalid JSON: " + e.what());
  }
  if (!document.is_object()) {
    throw FormatError(path + ": expected an object {\"<node id>\": [feature ids], ...}, found " +
                      std::string(document.type_name()));
  }
  SparseEntries entries;
  std::int64_t num_features = 0;
  for (const auto& [key, value] : document.items()) {
    std::int64_t node = 0;
    if (!io::try_parse_int(key, node) || node < 0 || node >= num_nodes) {
      throw FormatError(path + ": key " + io::quote(key) + " is not a node id in [0, " +
                        std::to_string(num_nodes) + ")");
    }
    if (!value.is_array()) {
      throw FormatError(path + ": node " + key + ": expected a list of feature ids, found " +
                        std::string(value.type_name()));
    }
    for (const auto& feature : value) {
      if (!feature.is_number_integer() || feature.get<std::int64_t>() < 0 ||
          feature.get<std::int64_t>() >= std::numeric_limits<LocalId>::max()) {
        throw FormatError(path + ": node " + key + ": expected non-negative feature ids, found " +
                          feature.dump());
      }
      const auto id = feature.get<std::int64_t>();
      num_features = std::max(num_features, id + 1);
      entries.add(node, static_cast<LocalId>(id), 1.0f);
    }
  }
  return build_csr(backend, num_nodes, num_features, entries);
}

} // namespace

Dataset load_musae(const BackendPtr& backend, const std::string& edges_path) {
  require_host(backend);
  const MusaePaths paths = musae_paths(edges_path);
  Dataset ds;
  ds.name = name_from_path(paths.features);

  EncodedClasses classes = encode_class_names(read_targets(paths.target));
  ds.num_nodes = static_cast<std::int64_t>(classes.labels.size());
  ds.labels = std::move(classes.labels);
  ds.num_classes = static_cast<std::int32_t>(classes.names.size());
  ds.adjacency = graph::build_symmetric_csr(
      backend, read_edge_csv(paths.edges, ds.num_nodes, true, "the target file"));
  ds.features.sparse = read_feature_lists(backend, paths.features, ds.num_nodes);
  ds.origin.features = paths.features + ": its largest feature id + 1";
  check_loaded(ds, {.features = paths.features, .edges = paths.edges, .labels = paths.target});
  return ds;
}

} // namespace tessera::datasets::detail
