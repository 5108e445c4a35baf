// LINQS citation data as text: <name>.content (id, feature values, class) and <name>.cites.
#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/text_input.hpp"

#include <cmath>
#include <filesystem>
#include <string_view>
#include <unordered_map>

namespace tessera::datasets::detail {

std::string cites_path_for(const std::string& content_path) {
  std::string base = content_path;
  if (base.ends_with(".gz")) base.resize(base.size() - 3);
  if (base.ends_with(".content")) base.resize(base.size() - 8);
  return io::first_existing({base + ".cites", base + ".cites.gz"});
}

Dataset load_linqs(const BackendPtr& backend, const std::string& content_path) {
  require_host(backend);
  const std::string cites_path = cites_path_for(content_path);
  Dataset ds;
  ds.name = name_from_path(content_path);

  // Ids are arbitrary strings in LINQS sets; nodes are numbered in file order.
  std::unordered_map<std::string, std::int64_t> node_of;
  std::vector<std::string> class_of_node;
  SparseEntries entries;
  std::int64_t num_features = -1;
  std::vector<std::string_view> fields;
  io::LineReader content(content_path);
  std::string_view line;
  while (content.next(line)) {
    if (io::is_blank(line)) continue;
    io::split_whitespace(line, fields);
    const auto width = static_cast<std::int64_t>(fields.size());
    if (num_features < 0) {
      if (width < 3) {
        content.fail("expected a paper id, feature values and a class name, found " +
                     std::to_string(width) + " fields");
      }
      num_features = width - 2;
    } else if (width != num_features + 2) {
      content.fail("expected " + std::to_string(num_features + 2) + " fields (paper id, " +
                   std::to_string(num_features) +
                   " feature values, class) as on the first "
                   "line, found " +
                   std::to_string(width));
    }
    const auto node = static_cast<std::int64_t>(class_of_node.size());
    if (!node_of.emplace(std::string(fields[0]), node).second) {
      content.fail("paper id " + io::quote(fields[0]) + " appears twice");
    }
    for (std::int64_t j = 0; j < num_features; ++j) {
      const std::string_view field = fields[static_cast<std::size_t>(j) + 1];
      if (field == "0") continue;
      const double value = field == "1" ? 1.0 : io::parse_double(content, field, "a feature value");
      if (!std::isfinite(static_cast<float>(value))) {
        content.fail("feature value " + io::quote(field) + " at row " + std::to_string(node) +
                     ", column " + std::to_string(j) + " (paper " + io::quote(fields[0]) + ") " +
                     io::not_finite_reason(value));
      }
      if (value != 0.0) entries.add(node, static_cast<LocalId>(j), static_cast<float>(value));
    }
    class_of_node.emplace_back(fields.back());
  }
  if (class_of_node.empty()) throw FormatError(content_path + ": no nodes (the file is empty)");
  ds.num_nodes = static_cast<std::int64_t>(class_of_node.size());
  check_node_count(ds.num_nodes, content_path);
  ds.features.sparse = build_csr(backend, ds.num_nodes, num_features, entries);
  EncodedClasses classes = encode_class_names(class_of_node);
  ds.labels = std::move(classes.labels);
  ds.num_classes = static_cast<std::int32_t>(classes.names.size());

  graph::EdgeList edges;
  edges.num_nodes = ds.num_nodes;
  const std::string content_name = std::filesystem::path(content_path).filename().string();
  io::LineReader cites(cites_path);
  while (cites.next(line)) {
    if (io::is_blank(line)) continue;
    io::split_whitespace(line, fields);
    if (fields.size() != 2) {
      cites.fail("expected '<cited id> <citing id>', found " + std::to_string(fields.size()) +
                 " fields");
    }
    std::int64_t ends[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      const auto it = node_of.find(std::string(fields[k]));
      if (it == node_of.end()) {
        cites.fail("paper id " + io::quote(fields[k]) + " does not appear in " + content_name);
      }
      ends[k] = it->second;
    }
    edges.add(ends[1], ends[0]); // citing -> cited
  }
  ds.adjacency = graph::build_symmetric_csr(backend, edges);
  // Rows are nodes in the order of the .content lines.
  check_loaded(ds, {.features = content_path, .edges = cites_path, .labels = content_path});
  ds.row_normalize = true; // LINQS's sets are bag-of-words features, row-normalized by recipe
  return ds;
}

} // namespace tessera::datasets::detail
