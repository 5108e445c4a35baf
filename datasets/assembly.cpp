// Pieces every loader uses to turn parsed records into a Dataset: sparse features, labels, names.
#include "assembly.hpp"

#include "tessera/core/error.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/io/graph_files.hpp"
#include "tessera/io/text_input.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/core.h>
#include <limits>
#include <map>
#include <numeric>

namespace tessera::datasets::detail {

void require_host(const BackendPtr& backend) {
  if (backend == nullptr) throw InvalidArgument("datasets: backend is null");
  if (backend->kind() != DeviceKind::Cpu) {
    throw InvalidArgument("datasets load into host memory; pass a CPU backend, not " +
                          backend->describe());
  }
}

void check_node_count(std::int64_t num_nodes, const std::string& where) {
  if (num_nodes > std::numeric_limits<LocalId>::max()) {
    throw FormatError(where + ": " + std::to_string(num_nodes) +
                      " nodes exceed the 2^31 - 1 that one CSR can index");
  }
}

Csr build_csr(const BackendPtr& backend, std::int64_t rows, std::int64_t cols,
              const SparseEntries& entries) {
  // Counting sort by row, then sort each row by column and drop repeats.
  std::vector<Offset> start(static_cast<std::size_t>(rows) + 1, 0);
  for (const auto r : entries.row)
    ++start[static_cast<std::size_t>(r) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<std::int64_t> order(entries.row.size());
  {
    std::vector<Offset> cursor(start.begin(), start.end() - 1);
    for (std::int64_t k = 0; k < entries.size(); ++k)
      order[cursor[entries.row[k]]++] = k;
  }
  std::vector<Offset> kept(static_cast<std::size_t>(rows), 0);
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t r = 0; r < rows; ++r) {
    auto first = order.begin() + start[r], last = order.begin() + start[r + 1];
    // Stable, so the first of repeated (row, col) entries stays in front and is the one kept.
    std::stable_sort(first, last, [&](std::int64_t a, std::int64_t b) {
      return entries.col[a] < entries.col[b];
    });
    const auto end = std::unique(first, last, [&](std::int64_t a, std::int64_t b) {
      return entries.col[a] == entries.col[b];
    });
    kept[r] = end - first;
  }
  Csr out(backend, rows, cols, std::accumulate(kept.begin(), kept.end(), Offset{0}));
  std::partial_sum(kept.begin(), kept.end(), out.row_ptr() + 1);
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t r = 0; r < rows; ++r) {
    for (Offset k = 0; k < kept[r]; ++k) {
      const std::int64_t source = order[start[r] + k];
      out.col()[out.row_ptr()[r] + k] = entries.col[source];
      out.val()[out.row_ptr()[r] + k] = entries.val[source];
    }
  }
  return out;
}

graph::EdgeList read_edge_csv(const std::string& path, std::int64_t num_nodes, bool header_allowed,
                              const std::string& nodes_from) {
  graph::EdgeList edges;
  edges.num_nodes = num_nodes;
  std::vector<std::string_view> fields;
  io::LineReader in(path);
  std::string_view line;
  bool first = true;
  while (in.next(line)) {
    if (io::is_blank(line)) continue;
    io::split_on(line, ',', fields);
    // A header ("id_1,id_2"): a first field that is no number at all (one beyond 64 bits, or a
    // negative one, is a record, and refused below).
    // Spaces before a number do not make it a header (the record is refused as such below).
    const std::string_view lead =
        fields[0].substr(std::min(fields[0].find_first_not_of(" \t"), fields[0].size()));
    const bool header = header_allowed && first && lead.find_first_of("-0123456789") != 0;
    first = false;
    if (header) continue;
    if (fields.size() != 2) in.fail("expected 'source,target', found " + io::quote(line));
    std::int64_t ends[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      ends[k] = io::parse_int(in, fields[k], "a node id");
      if (ends[k] < 0 || ends[k] >= num_nodes) {
        in.fail("node id " + std::to_string(ends[k]) + " is outside [0, " +
                std::to_string(num_nodes) + ") (" + nodes_from + " has " +
                std::to_string(num_nodes) + " nodes)");
      }
    }
    edges.add(ends[0], ends[1]);
  }
  return edges;
}

Csr identity_features(const BackendPtr& backend, std::int64_t num_nodes) {
  Csr out(backend, num_nodes, num_nodes, num_nodes);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < num_nodes; ++i) {
    out.row_ptr()[i + 1] = i + 1;
    out.col()[i] = static_cast<LocalId>(i);
    out.val()[i] = 1.0f;
  }
  return out;
}

namespace {

std::string place_of(const RowPlace& place, std::int64_t row) {
  return place ? place(row) : "row " + std::to_string(row);
}

std::int64_t count_labelled(std::span<const std::int32_t> labels) {
  return std::count_if(labels.begin(), labels.end(), [](std::int32_t label) { return label >= 0; });
}

} // namespace

std::int64_t max_class_count(std::int64_t labelled) noexcept {
  return labelled + kClassSlack;
}

std::int32_t count_classes(std::span<const std::int32_t> labels, const std::string& file,
                           const RowPlace& place) {
  // In 64 bits: 1 + a label of 2^31 - 1 does not fit an int32.
  std::int64_t largest = -1, row_of_largest = -1;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] > largest) {
      largest = labels[i];
      row_of_largest = static_cast<std::int64_t>(i);
    }
  }
  const std::int64_t classes = largest + 1;
  const std::int64_t labelled = count_labelled(labels);
  if (classes > max_class_count(labelled)) {
    throw FormatError(file + ": label " + std::to_string(largest) + " at " +
                      place_of(place, row_of_largest) + " means " + std::to_string(classes) +
                      " classes for " + std::to_string(labelled) +
                      " labelled rows; class ids must be dense, at most labelled rows + " +
                      std::to_string(kClassSlack) + " = " +
                      std::to_string(max_class_count(labelled)) + " classes");
  }
  return static_cast<std::int32_t>(classes);
}

void check_classes(std::span<const std::int32_t> labels, std::int64_t num_classes,
                   const std::string& labels_file, const std::string& count_source,
                   const RowPlace& place) {
  const std::int64_t labelled = count_labelled(labels);
  if (num_classes < 0 || num_classes > max_class_count(labelled)) {
    throw FormatError(count_source + " is " + std::to_string(num_classes) + " for " +
                      std::to_string(labelled) + " labelled rows; expected 0 to labelled rows + " +
                      std::to_string(kClassSlack) + " = " +
                      std::to_string(max_class_count(labelled)));
  }
  check_labels(labels, num_classes, labels_file, count_source, place);
}

void check_labels(std::span<const std::int32_t> labels, std::int64_t num_classes,
                  const std::string& labels_file, const std::string& count_source,
                  const RowPlace& place) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < -1 || labels[i] >= num_classes) {
      throw FormatError(labels_file + ": label " + std::to_string(labels[i]) + " at " +
                        place_of(place, static_cast<std::int64_t>(i)) + " is outside [0, " +
                        std::to_string(num_classes) + ") (" + count_source + " is " +
                        std::to_string(num_classes) + "; -1 means unknown)");
    }
  }
}

std::int64_t max_node_count(std::int64_t mentioned) noexcept {
  return 2 * mentioned + 1024;
}

void check_finite(const Csr& adjacency, const graph::Features& features, const Sources& sources,
                  std::int64_t first_row) {
  if (features.dense) io::require_finite(*features.dense, sources.features, "feature", first_row);
  if (features.sparse) {
    io::require_finite(*features.sparse, sources.features, "feature", first_row);
  }
  io::require_finite(adjacency, sources.edges, "edge value", first_row);
}

std::uint64_t pair_hash(std::int64_t r, std::int64_t c) noexcept {
  std::uint64_t x = (static_cast<std::uint64_t>(r) << 32) ^ static_cast<std::uint64_t>(c);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

namespace {

/// The first entry of `a`'s row r that breaks the form check_adjacency_rows names, as a message;
/// empty when the row is in that form.
std::string adjacency_row_problem(const Csr& a, std::int64_t r, std::int64_t row,
                                  const std::string& col_file, const std::string& val_file) {
  // The message is made only for the entry that breaks the form: this runs over every nonzero.
  const auto at = [&](std::int64_t c) {
    return " at row " + std::to_string(row) + ", column " + std::to_string(c);
  };
  for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
    const std::int64_t c = a.col()[k];
    if (c < 0 || c >= a.cols()) {
      return col_file + ": column" + at(c) + " is outside the graph's " + std::to_string(a.cols()) +
             " nodes";
    }
    if (c == row) {
      return col_file + ": self-loop" + at(c) +
             ": a dataset's adjacency holds none (models add their own)";
    }
    if (k > a.row_ptr()[r] && c <= a.col()[k - 1]) {
      return col_file + ": column" + at(c) + " follows column " + std::to_string(a.col()[k - 1]) +
             ": a row's columns are ascending and unique (no edge twice)";
    }
    if (a.val()[k] != 1.0f) {
      return val_file + ": edge value " + fmt::format("{}", a.val()[k]) + at(c) +
             ": every edge of a dataset weighs 1";
    }
  }
  return {};
}

} // namespace

void check_adjacency_rows(const Csr& adjacency, std::int64_t first_row, const std::string& col_file,
                          const std::string& val_file) {
  bool good = true;
#pragma omp parallel for reduction(&& : good) schedule(static)
  for (std::int64_t r = 0; r < adjacency.rows(); ++r) {
    good = good && adjacency_row_problem(adjacency, r, first_row + r, col_file, val_file).empty();
  }
  if (good) return;
  for (std::int64_t r = 0; r < adjacency.rows(); ++r) {
    const std::string problem =
        adjacency_row_problem(adjacency, r, first_row + r, col_file, val_file);
    if (!problem.empty()) throw FormatError(problem);
  }
}

void check_adjacency(const Csr& adjacency, const std::string& col_file,
                     const std::string& val_file) {
  check_adjacency_rows(adjacency, 0, col_file, val_file);
  const Offset* row_ptr = adjacency.row_ptr();
  const LocalId* col = adjacency.col();
  std::uint64_t forward = 0, backward = 0;
#pragma omp parallel for reduction(+ : forward, backward) schedule(static)
  for (std::int64_t r = 0; r < adjacency.rows(); ++r) {
    for (Offset k = row_ptr[r]; k < row_ptr[r + 1]; ++k) {
      forward += pair_hash(r, col[k]);
      backward += pair_hash(col[k], r);
    }
  }
  if (forward == backward) return;
  // Asymmetric: find the entry without its mirror (rows are sorted, so by binary search).
  for (std::int64_t r = 0; r < adjacency.rows(); ++r) {
    for (Offset k = row_ptr[r]; k < row_ptr[r + 1]; ++k) {
      const std::int64_t c = col[k];
      if (!std::binary_search(col + row_ptr[c], col + row_ptr[c + 1], static_cast<LocalId>(r))) {
        throw FormatError(col_file + ": edge (" + std::to_string(r) + ", " + std::to_string(c) +
                          ") has no mirror (" + std::to_string(c) + ", " + std::to_string(r) +
                          "): a dataset's adjacency is symmetric (each undirected edge stored "
                          "both ways)");
      }
    }
  }
}

void check_loaded(Dataset& dataset, const Sources& sources) {
  if (dataset.origin.features.empty()) dataset.origin.features = sources.features;
  if (dataset.origin.labels.empty()) dataset.origin.labels = sources.labels;
  check_finite(dataset.adjacency, dataset.features, sources, 0);
  if (dataset.has_labels()) {
    check_classes(dataset.labels, dataset.num_classes, sources.labels,
                  sources.class_count.empty() ? "the class count of " + sources.labels
                                              : sources.class_count);
  }
}

void refuse_split_index(int split_index, std::int64_t num_splits, const std::string& source) {
  const std::string stored = num_splits == 0   ? "stores no split"
                             : num_splits == 1 ? "stores 1 split"
                                               : "stores " + std::to_string(num_splits) + " splits";
  throw InvalidArgument(
      "split index " + std::to_string(split_index) + " is out of range: '" + source + "' " +
      stored + " (accepted: " +
      (num_splits <= 1 ? std::string("0") : "0 to " + std::to_string(num_splits - 1)) + ")");
}

void check_split_index(int split_index, std::int64_t num_splits, const std::string& source) {
  // Split 0 is the default: the stored split when there is one, else none to choose.
  if (split_index == 0 || (split_index > 0 && split_index < num_splits)) return;
  refuse_split_index(split_index, num_splits, source);
}

namespace {

/// How many ids the ascending `a` and `b` share, and the first of them (-1 when none).
std::pair<std::int64_t, std::int64_t> common_ids(std::span<const std::int32_t> a,
                                                 std::span<const std::int32_t> b) {
  std::int64_t count = 0, first = -1;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      if (count++ == 0) first = a[i];
      ++i;
      ++j;
    }
  }
  return {count, first};
}

} // namespace

namespace {

/// "SOURCE: WHICH" for split messages.
std::string split_place(const std::string& source, const std::string& which) {
  return (source.empty() ? std::string("the stored split") : source) + ": " + which;
}

} // namespace

void check_split(const Split& split, std::span<const std::int32_t> labels,
                 const std::string& source, const std::string& labels_source,
                 const std::string& which, bool allow_overlap) {
  const auto refuse = [&](const std::string& problem) {
    throw FormatError(split_place(source, which) + problem);
  };
  if (split.train.empty() || split.test.empty()) {
    const std::string missing = split.train.empty() && split.test.empty() ? "no train and no test"
                                : split.train.empty()                     ? "no train"
                                                                          : "no test";
    refuse("the stored split has " + missing + " nodes (train " +
           std::to_string(split.train.size()) + ", val " + std::to_string(split.val.size()) +
           ", test " + std::to_string(split.test.size()) +
           "): a split needs a train and a test part; a random split is drawn only for data "
           "that stores none");
  }
  check_split_parts(split, labels, 0, source, labels_source, which, allow_overlap);
}

void check_split_parts(const Split& split, std::span<const std::int32_t> labels,
                       std::int64_t first_row, const std::string& source,
                       const std::string& labels_source, const std::string& which,
                       bool allow_overlap) {
  const auto refuse = [&](const std::string& problem) {
    throw FormatError(split_place(source, which) + problem);
  };
  const std::pair<const char*, const std::vector<std::int32_t>*> parts[] = {
      {"train", &split.train}, {"val", &split.val}, {"test", &split.test}};
  for (const auto& [name, ids] : parts) {
    for (std::size_t i = 1; i < ids->size(); ++i) {
      if ((*ids)[i - 1] == (*ids)[i]) {
        refuse(std::string("the ") + name + " part lists node " + std::to_string((*ids)[i]) +
               " twice");
      }
      if ((*ids)[i - 1] > (*ids)[i]) {
        refuse(std::string("the ") + name + " part is not ascending at position " +
               std::to_string(i) + " (" + std::to_string((*ids)[i]) + " after " +
               std::to_string((*ids)[i - 1]) + ")");
      }
    }
    if (labels.empty()) continue;
    for (const std::int32_t id : *ids) {
      const std::int64_t row = id - first_row;
      if (row >= 0 && row < static_cast<std::int64_t>(labels.size()) && labels[row] < 0) {
        refuse(std::string("node ") + std::to_string(id) + " of the " + name +
               " part is unlabelled (label " + std::to_string(labels[row]) + " in " +
               (labels_source.empty() ? std::string("the labels") : labels_source) +
               "; -1 means unlabelled): a split may list labelled nodes only");
      }
    }
  }
  if (allow_overlap) return;
  for (std::size_t a = 0; a < 3; ++a) {
    for (std::size_t b = a + 1; b < 3; ++b) {
      const auto [count, first] = common_ids(*parts[a].second, *parts[b].second);
      if (count == 0) continue;
      refuse(std::string("the ") + parts[a].first + " and " + parts[b].first + " parts share " +
             std::to_string(count) + " node" + (count == 1 ? "" : "s") + " (the first: node " +
             std::to_string(first) + " of " + std::to_string(parts[a].second->size()) + " and " +
             std::to_string(parts[b].second->size()) +
             "): accuracy measured on trained nodes means nothing; allow split overlap if it is "
             "intended");
    }
  }
}

void check_stored_splits(const Dataset& dataset, bool allow_overlap) {
  if (!dataset.split_stored) return;
  if (dataset.all_splits.empty()) {
    check_split({dataset.train_idx, dataset.val_idx, dataset.test_idx}, dataset.labels,
                dataset.origin.split, dataset.origin.labels, "", allow_overlap);
    return;
  }
  const std::size_t count = dataset.all_splits.size();
  for (std::size_t k = 0; k < count; ++k) {
    check_split(dataset.all_splits[k], dataset.labels, dataset.origin.split, dataset.origin.labels,
                "split " + std::to_string(k) + " of " + std::to_string(count) + ": ",
                allow_overlap);
  }
}

EncodedClasses encode_class_names(const std::vector<std::string>& name_of_node) {
  std::map<std::string, std::int32_t> ids;
  for (const auto& name : name_of_node) {
    if (!name.empty()) ids.emplace(name, 0);
  }
  EncodedClasses out;
  for (auto& [name, id] : ids) {
    id = static_cast<std::int32_t>(out.names.size());
    out.names.push_back(name);
  }
  out.labels.reserve(name_of_node.size());
  for (const auto& name : name_of_node)
    out.labels.push_back(name.empty() ? -1 : ids.at(name));
  return out;
}

std::vector<std::int32_t> random_permutation(std::int64_t n, const RngKey& key) {
  if (n > std::numeric_limits<std::int32_t>::max()) {
    throw InvalidArgument("random_permutation: " + std::to_string(n) + " elements exceed 2^31 - 1");
  }
  std::vector<std::int32_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = uniform_index(key, i, 0, static_cast<std::uint32_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::string name_from_path(const std::string& path) {
  std::filesystem::path p(path);
  if (p.extension() == ".gz") p = p.stem();
  return p.stem().string();
}

Dataset dataset_for_file(const BackendPtr& backend, const std::string& path) {
  require_host(backend);
  Dataset ds;
  ds.name = name_from_path(path);
  return ds;
}

} // namespace tessera::datasets::detail
