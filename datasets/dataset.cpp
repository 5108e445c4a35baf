// load_dataset(): resolves names, FORMAT:PATH specs and generator specs to a loader; random splits
// and feature normalization.
#include "tessera/datasets/dataset.hpp"

#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/file_kind.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/rng.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <sys/stat.h>

namespace tessera::datasets {

namespace {

namespace fs = std::filesystem;
using namespace detail;

constexpr std::string_view kNames = "cora, cora-linqs, cora-gnnbench, minesweeper, facebook, "
                                    "email-eu-core, slashdot, 4elt";
constexpr std::string_view kFormats =
    "native, npz, planetoid, gnnbench, heterophilous, linqs, snap, metis, musae, mtx, ogb";

/// Throws IoError naming the missing file and the two ways to point at the data folder.
void require_dataset_files(const std::string& name, const std::string& data_dir,
                           const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    // There but not a regular file (a folder, a device, a FIFO, also through a link): say so.
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
      throw IoError("dataset '" + name + "': '" + path + "' is " +
                    describe_file_kind(info.st_mode) + ", not a regular file (under data folder '" +
                    data_dir + "')");
    }
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      throw IoError("dataset '" + name + "': file '" + path + "' not found under data folder '" +
                    data_dir +
                    "'; point the data folder (or TESSERA_DATA_DIR) at the folder that "
                    "holds the datasets, or fetch the set: scripts/fetch_datasets.sh " +
                    name);
    }
  }
}

/// A dataset known by name: its files under the data folder, and how they load (paths in the
/// order of `files`).
struct NamedDataset {
  const char* name;
  std::vector<const char*> files;
  Dataset (*load)(const BackendPtr&, const std::vector<std::string>& paths, int split_index);
};

const std::vector<NamedDataset>& named_datasets() {
  static const std::vector<NamedDataset> table = {
      {"cora",
       {"cora_planetoid/cora_planetoid.npz"},
       [](const BackendPtr& b, const std::vector<std::string>& p, int split) {
         return load_csr_npz(b, p[0], split);
       }},
      {"cora-linqs",
       {"cora_linqs/cora.content.gz", "cora_linqs/cora.cites"},
       [](const BackendPtr& b, const std::vector<std::string>& p, int) {
         return load_linqs(b, p[0]);
       }},
      {"cora-gnnbench",
       {"gnn_benchmark/cora.npz"},
       [](const BackendPtr& b, const std::vector<std::string>& p, int split) {
         return load_csr_npz(b, p[0], split);
       }},
      {"minesweeper",
       {"heterophilous_graphs/minesweeper.npz"},
       [](const BackendPtr& b, const std::vector<std::string>& p, int split) {
         return load_heterophilous_npz(b, p[0], split);
       }},
      {"facebook",
       {"facebook_page_page/facebook_edges.csv.gz", "facebook_page_page/facebook_target.csv.gz",
        "facebook_page_page/facebook.json.gz"},
       [](const BackendPtr& b, const std::vector<std::string>& p, int) {
         return load_musae(b, p[0]);
       }},
      {"email-eu-core",
       {"email_eu_core/email-Eu-core.txt.gz", "email_eu_core/email-Eu-core-department-labels"},
       [](const BackendPtr& b, const std::vector<std::string>& p, int) {
         return load_email_eu_core(b, p[0], p[1]);
       }},
      {"slashdot",
       {"snap_soc_slashdot0902/soc-Slashdot0902.txt.gz"},
       [](const BackendPtr& b, const std::vector<std::string>& p, int) {
         return load_snap(b, p[0]);
       }},
      {"4elt",
       {"metis_4elt/4elt.graph"},
       [](const BackendPtr& b, const std::vector<std::string>& p, int) {
         return load_metis_graph(b, p[0]);
       }},
  };
  return table;
}

/// The named dataset `name` (nullptr when unknown) and its files under the data folder.
const NamedDataset* find_named(const std::string& name, const LoadOptions& options,
                               std::vector<std::string>& paths) {
  const std::string dir = options.data_dir.empty() ? default_data_dir() : options.data_dir;
  for (const NamedDataset& named : named_datasets()) {
    if (name != named.name) continue;
    for (const char* file : named.files)
      paths.push_back((fs::path(dir) / file).string());
    return &named;
  }
  return nullptr;
}

Dataset load_named(const BackendPtr& backend, const std::string& name, const LoadOptions& options) {
  std::vector<std::string> paths;
  const NamedDataset* named = find_named(name, options, paths);
  if (named == nullptr) {
    std::error_code ec;
    if (fs::is_directory(name, ec)) throw_not_native(name);
    throw InvalidArgument("unknown dataset '" + name + "'; known names: " + std::string(kNames) +
                          "; or FORMAT:PATH with FORMAT one of " + std::string(kFormats) +
                          "; or a generator rmat:... / sbm:... / blobs:...");
  }
  require_dataset_files(name, options.data_dir.empty() ? default_data_dir() : options.data_dir,
                        paths);
  Dataset ds = named->load(backend, paths, options.split_index);
  ds.name = name;
  return ds;
}

Dataset load_file(const BackendPtr& backend, const std::string& format, const std::string& path,
                  const LoadOptions& options) {
  if (path.empty()) {
    throw InvalidArgument("dataset spec '" + format + ":' needs a path after the colon");
  }
  if (format == "native") return load_native(backend, path, options.split_index);
  if ((format == "npz" || format == "planetoid") &&
      fs::path(path).filename().string().starts_with("ind.")) {
    throw FormatError(path +
                      ": raw Planetoid files (ind.NAME.x, .graph, ...) are Python pickles, "
                      "which only Python can read; convert them once with `python3 "
                      "scripts/convert_dataset.py planetoid " +
                      path +
                      " OUT.npz` (Tessera's source tree; it unpickles only numpy arrays, scipy "
                      "sparse matrices and plain containers) and load npz:OUT.npz");
  }
  if (format == "npz") return load_any_npz(backend, path, options.split_index);
  if (format == "planetoid" || format == "gnnbench") {
    return load_csr_npz(backend, path, options.split_index);
  }
  if (format == "heterophilous") return load_heterophilous_npz(backend, path, options.split_index);
  if (format == "linqs") return load_linqs(backend, path);
  if (format == "snap") return load_snap(backend, path);
  if (format == "metis") return load_metis_graph(backend, path);
  if (format == "musae") return load_musae(backend, path);
  if (format == "mtx") return load_matrix_market(backend, path);
  if (format == "ogb") return load_ogb(backend, path);
  throw InvalidArgument("unknown dataset format '" + format +
                        "'; formats: " + std::string(kFormats) + "; generators: rmat, sbm, blobs");
}

} // namespace

Dataset load_dataset(const BackendPtr& backend, const std::string& spec,
                     const LoadOptions& options) {
  require_host(backend);
  if (spec.empty())
    throw InvalidArgument("empty dataset spec; known names: " + std::string(kNames));
  const std::size_t colon = spec.find(':');
  const std::string head = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const ProgressStage progress("loading " + spec);
  Dataset ds;
  if (head == "rmat") {
    ds = generate_rmat(backend, rest, options.seed);
  } else if (head == "sbm") {
    ds = generate_sbm(backend, rest, options.seed);
  } else if (head == "blobs") {
    ds = generate_blobs(backend, rest, options.seed);
  } else if (colon != std::string::npos) {
    ds = load_file(backend, head, rest, options);
  } else if (is_native_dataset(spec)) {
    ds = load_native(backend, spec, options.split_index);
  } else {
    ds = load_named(backend, spec, options);
  }
  // Loaders of data with several splits pick one (and refuse an index beyond them); every other
  // source has one or none and would ignore the index, so a nonzero one is refused here.
  check_split_index(options.split_index, ds.num_splits(), spec);
  check_stored_splits(ds, options.allow_split_overlap);
  ds.row_normalize = ds.row_normalize || recipe_row_normalizes(ds.name);
  return ds;
}

bool recipe_row_normalizes(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const std::string_view set : {"cora", "citeseer", "pubmed"}) {
    if (lower.starts_with(set)) return true;
  }
  return false;
}

std::vector<std::string> dataset_inputs(const std::string& spec, const LoadOptions& options) {
  const std::size_t colon = spec.find(':');
  const std::string head = spec.substr(0, colon);
  const std::string path = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (head == "rmat" || head == "sbm" || head == "blobs" || spec.empty()) return {};
  if (colon == std::string::npos) {
    std::vector<std::string> paths;
    if (find_named(spec, options, paths) != nullptr) return paths;
    return {spec}; // a native dataset folder (or nothing load_dataset knows)
  }
  if (head == "linqs") return {path, cites_path_for(path)};
  if (head == "musae" && path.find("_edges.csv") != std::string::npos) {
    const MusaePaths files = musae_paths(path);
    return {files.edges, files.target, files.features};
  }
  // native and ogb name a folder; the other formats one file.
  return {path};
}

std::string default_data_dir() {
  const auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  if (auto dir = env("TESSERA_DATA_DIR"); !dir.empty()) return dir;
  if (auto cache = env("XDG_CACHE_HOME"); !cache.empty()) {
    return (fs::path(cache) / "tessera" / "datasets").string();
  }
  if (auto home = env("HOME"); !home.empty()) {
    return (fs::path(home) / ".cache" / "tessera" / "datasets").string();
  }
  return (fs::path(".cache") / "tessera" / "datasets").string();
}

void make_random_split(Dataset& dataset, double fraction_train, double fraction_val,
                       std::uint64_t seed) {
  if (!(fraction_train >= 0.0 && fraction_val >= 0.0 && fraction_train + fraction_val <= 1.0)) {
    throw InvalidArgument("split fractions must be non-negative and sum to at most 1, got train " +
                          std::to_string(fraction_train) + " and val " +
                          std::to_string(fraction_val));
  }
  if (!dataset.has_labels()) {
    throw InvalidArgument("dataset '" + dataset.name + "' has no labels to split");
  }
  std::vector<std::int32_t> labelled;
  for (std::size_t i = 0; i < dataset.labels.size(); ++i) {
    if (dataset.labels[i] >= 0) labelled.push_back(static_cast<std::int32_t>(i));
  }
  const auto n = static_cast<std::int64_t>(labelled.size());
  const auto order = random_permutation(n, RngKey::make(seed, RngPurpose::Split, 0));
  const auto num_train =
      std::min<std::int64_t>(n, std::llround(fraction_train * static_cast<double>(n)));
  const auto num_val =
      std::min<std::int64_t>(n - num_train, std::llround(fraction_val * static_cast<double>(n)));
  const auto take = [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int32_t> ids(static_cast<std::size_t>(end - begin));
    for (std::int64_t k = begin; k < end; ++k)
      ids[k - begin] = labelled[order[k]];
    std::sort(ids.begin(), ids.end());
    return ids;
  };
  dataset.train_idx = take(0, num_train);
  dataset.val_idx = take(num_train, num_train + num_val);
  dataset.test_idx = take(num_train + num_val, n);
}

namespace {

/// Divides the values [first, last) of one row by their L1 norm (a zero row stays zero). For
/// non-negative features this is Kipf & Welling's row normalization; the absolute value keeps
/// rows with negative entries (generated features) from dividing by a near-zero sum.
void l1_normalize(float* first, float* last) {
  double norm = 0.0;
  for (const float* v = first; v != last; ++v)
    norm += std::abs(*v);
  if (norm == 0.0) return;
  const auto inverse = static_cast<float>(1.0 / norm);
  for (float* v = first; v != last; ++v)
    *v *= inverse;
}

} // namespace

void row_normalize_features(graph::Features& features) {
  if (features.dense) {
    Dense& x = *features.dense;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < x.rows(); ++i)
      l1_normalize(x.data() + i * x.cols(), x.data() + (i + 1) * x.cols());
  }
  if (features.sparse) {
    Csr& x = *features.sparse;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < x.rows(); ++i)
      l1_normalize(x.val() + x.row_ptr()[i], x.val() + x.row_ptr()[i + 1]);
  }
}

bool use_default_split_when_missing(Dataset& dataset, std::uint64_t seed) {
  if (dataset.has_split() || !dataset.has_labels()) return false;
  make_random_split(dataset, 0.6, 0.2, seed);
  return true;
}

} // namespace tessera::datasets
