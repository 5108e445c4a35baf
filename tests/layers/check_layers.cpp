// check_layers ROOT: checks every #include of the source tree under ROOT against the layer table
// ROOT/cmake/layers.txt (what each layer, app folder and test folder may include), and that each
// layer keeps its headers where the table's one rule puts them. Prints one line per violation —
// file, line, the include and the arrow it makes — and exits 1; prints a summary and exits 0 when
// there is none; exits 2 when the table cannot be read.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Layer {
  std::string name, folder, kind;
  std::vector<std::string> depends, libraries;
};

struct Library {
  std::string name;
  std::vector<std::string> headers; // "omp.h", "fmt/" (a folder), "cuda*.h" (a wildcard)
};

struct Table {
  std::vector<Layer> layers; // in table order, lowest first
  std::vector<Library> libraries;

  const Layer* layer(const std::string& name) const {
    for (const Layer& l : layers)
      if (l.name == name) return &l;
    return nullptr;
  }
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  if (text == "-") return parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);)
    parts.push_back(part);
  return parts;
}

Table read_table(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  Table table;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string field; fields >> field;)
      f.push_back(field);
    if (f.empty() || f[0].starts_with("#")) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    if (f[0] == "layer" && f.size() == 6) {
      Layer layer{f[1], f[2], f[3], split(f[4], ','), split(f[5], ',')};
      for (const std::string& dep : layer.depends) {
        if (table.layer(dep) == nullptr) {
          throw std::runtime_error(where + ": " + layer.name + " depends on '" + dep +
                                   "', which is not a layer above it");
        }
      }
      table.layers.push_back(layer);
    } else if (f[0] == "library" && f.size() == 4) {
      table.libraries.push_back({f[1], split(f[3], ',')});
    } else {
      throw std::runtime_error(where + ": malformed row");
    }
  }
  return table;
}

/// Whether `header` (as written in the #include) is one of `pattern`'s.
bool matches(const std::string& pattern, const std::string& header) {
  if (pattern.ends_with('/')) return header.starts_with(pattern);
  const std::size_t star = pattern.find('*');
  if (star == std::string::npos) return header == pattern;
  const std::string head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  return header.size() >= head.size() + tail.size() && header.starts_with(head) &&
         header.ends_with(tail) && header.find('/') == std::string::npos;
}

class Checker {
public:
  Checker(fs::path root, Table table) : root_(std::move(root)), table_(std::move(table)) {
    for (const Layer& l : table_.layers)
      exported_[l.name] = exports(l);
  }

  /// Every layer of kind public/internal keeps its interface in FOLDER/include/tessera/NAME.
  void check_folders() {
    for (const Layer& l : table_.layers) {
      if (l.kind != "public" && l.kind != "internal") continue;
      const fs::path include = root_ / l.folder / "include";
      if (!fs::is_directory(include / "tessera" / l.name)) {
        fail(l.folder, 0,
             "layer " + l.name + " keeps no headers in " + l.folder + "/include/tessera/" + l.name +
                 "/ (the table's rule)");
        continue;
      }
      for (const auto& entry : fs::recursive_directory_iterator(include)) {
        const fs::path rel = fs::relative(entry.path(), include);
        if (entry.is_regular_file() && !rel.string().starts_with("tessera/" + l.name + "/")) {
          fail(relative(entry.path()), 0,
               "a header of layer " + l.name + " outside include/tessera/" + l.name + "/");
        }
      }
    }
  }

  void check_tree() {
    for (auto it = fs::recursive_directory_iterator(root_);
         it != fs::recursive_directory_iterator(); ++it) {
      const std::string name = it->path().filename().string();
      if (it->is_directory() && (name.starts_with(".") || name.starts_with("build"))) {
        it.disable_recursion_pending();
        continue;
      }
      static const std::set<std::string> sources{".cpp", ".hpp", ".cu", ".cuh", ".h", ".cc"};
      if (!it->is_regular_file() || !sources.contains(it->path().extension().string())) continue;
      if (const Layer* owner = owner_of(relative(it->path()))) check_file(it->path(), *owner);
    }
  }

  int violations() const { return violations_; }
  int files() const { return files_; }
  int includes() const { return includes_; }

private:
  /// The layers whose interface a layer depending on `l` sees, as CMake links them: `l` itself
  /// and what its dependencies export, except through an internal one (linked privately).
  std::set<std::string> exports(const Layer& l) const {
    std::set<std::string> out{l.name};
    for (const std::string& dep : l.depends) {
      if (table_.layer(dep)->kind == "internal") continue;
      const std::set<std::string>& more = exported_.at(dep);
      out.insert(more.begin(), more.end());
    }
    return out;
  }

  /// The layers whose interface a file of layer `l` may include: its own, and what each layer it
  /// lists exports; a test sees every layer's.
  std::set<std::string> visible(const Layer& l) const {
    std::set<std::string> out{l.name};
    for (const std::string& dep : l.depends) {
      const std::set<std::string>& more = exported_.at(dep);
      out.insert(more.begin(), more.end());
    }
    if (l.kind == "test") {
      for (const Layer& any : table_.layers) {
        if (any.kind == "public" || any.kind == "internal" || any.kind == "package")
          out.insert(any.name);
      }
    }
    return out;
  }

  std::string relative(const fs::path& p) const { return fs::relative(p, root_).generic_string(); }

  /// The layer whose folder holds `path` (the longest folder that is a prefix), or null.
  const Layer* owner_of(const std::string& path) const {
    const Layer* best = nullptr;
    for (const Layer& l : table_.layers) {
      if (path.starts_with(l.folder + "/") &&
          (best == nullptr || l.folder.size() > best->folder.size()))
        best = &l;
    }
    return best;
  }

  bool is_interface(const std::string& path, const Layer& owner) const {
    return path.starts_with(owner.folder + "/include/");
  }

  /// For a file under tests/unit/NAME/: the layer NAME, whose private headers it may include.
  const Layer* layer_under_test(const std::string& path) const {
    static const std::regex unit("^tests/unit/([a-z_]+)/");
    std::smatch m;
    return std::regex_search(path, m, unit) ? table_.layer(m[1]) : nullptr;
  }

  /// The file an include names, looked up as the compiler does for `from`, or nothing when it is
  /// not in the tree (a library's or the system's header).
  std::optional<fs::path> resolve(const fs::path& from, const Layer& layer, bool quoted,
                                  const std::string& header) const {
    std::vector<fs::path> dirs;
    if (quoted) dirs.push_back(from.parent_path());
    for (const Layer& l : table_.layers)
      dirs.push_back(root_ / l.folder / "include");
    if (layer.kind == "test") {
      dirs.push_back(root_ / layer.folder);
      if (const Layer* tested = layer_under_test(relative(from)))
        dirs.push_back(root_ / tested->folder);
    }
    for (const fs::path& dir : dirs) {
      const fs::path candidate = dir / header;
      if (fs::is_regular_file(candidate)) return fs::weakly_canonical(candidate);
    }
    return std::nullopt;
  }

  void check_file(const fs::path& path, const Layer& layer) {
    ++files_;
    const std::string rel = relative(path);
    const bool installed =
        (layer.kind == "public" || layer.kind == "package") && is_interface(rel, layer);
    const std::set<std::string> sees = visible(layer);
    std::ifstream in(path);
    static const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      ++includes_;
      const bool quoted = m[1] == "\"";
      const std::string header = m[2];
      const std::string spelled = (quoted ? "\"" : "<") + header + (quoted ? "\"" : ">");
      const std::string where = "#include " + spelled + ": ";
      // The generated build configuration belongs to core.
      const std::optional<fs::path> target =
          header == "tessera/config.hpp" ? std::optional<fs::path>(root_ / "src/core/include/x")
                                         : resolve(path, layer, quoted, header);
      if (!target && installed && !std::regex_match(header, std::regex("[a-z_]+"))) {
        fail(rel, number,
             where + "an installed header may include only the C++ standard "
                     "library and other installed headers (users of the package "
                     "would need it on their include path)");
        continue;
      }
      if (!target) {
        if (quoted) {
          fail(rel, number,
               where + "names no file of the tree (a library's or the system's "
                       "header goes in <>)");
        } else {
          check_library(rel, number, layer, header, where);
        }
        continue;
      }
      const std::string target_rel = relative(*target);
      const Layer* owner = owner_of(target_rel);
      const int before = violations_;
      if (owner == nullptr) {
        fail(rel, number, where + "a file outside every layer of the table");
        continue;
      }
      const bool interface = is_interface(target_rel, *owner);
      if (installed && (!interface || owner->kind == "internal")) {
        fail(
            rel, number,
            where + "an installed header of " + layer.name + " may include only " +
                "installed headers, and this is " +
                (interface ? "internal layer " + owner->name + "'s" : "private to " + owner->name));
      } else if (owner->name == layer.name) {
        // the layer's own headers
      } else if (!interface) {
        const Layer* tested = layer_under_test(rel);
        if (layer.kind != "test" || (owner->kind != "test" && tested != owner)) {
          fail(rel, number,
               where + "a private file of " + owner->name + " (only " + owner->name +
                   "'s own files" +
                   (owner->kind == "test" ? "" : " and tests/unit/" + owner->name) +
                   " may include it)");
        }
      } else if (!sees.contains(owner->name)) {
        fail(rel, number,
             where + layer.name + " -> " + owner->name + " is not an arrow of " +
                 "cmake/layers.txt (" + layer.name + " depends on " + describe_depends(layer) +
                 ")");
      }
      if (violations_ == before && header.find("..") != std::string::npos) {
        fail(rel, number,
             where + "reaches into another folder by path; include a layer's "
                     "headers as \"tessera/LAYER/...\" and a private one by its name");
      }
    }
  }

  void check_library(const std::string& rel, int number, const Layer& layer,
                     const std::string& header, const std::string& where) {
    for (const Library& library : table_.libraries) {
      const bool ours = std::any_of(library.headers.begin(), library.headers.end(),
                                    [&](const std::string& p) { return matches(p, header); });
      if (!ours) continue;
      if (std::find(layer.libraries.begin(), layer.libraries.end(), library.name) ==
          layer.libraries.end()) {
        fail(rel, number,
             where + layer.name + " does not use " + library.name +
                 " in cmake/layers.txt (it uses " +
                 (layer.libraries.empty() ? std::string("none") : join(layer.libraries)) + ")");
      }
      return;
    }
    // Neither a layer's nor a library's: the C++, C or system library's, which anyone may use.
  }

  std::string describe_depends(const Layer& layer) const {
    return layer.depends.empty() ? "no layer" : join(layer.depends);
  }

  static std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts)
      out += (out.empty() ? "" : ", ") + p;
    return out;
  }

  void fail(const std::string& file, int line, const std::string& message) {
    ++violations_;
    std::printf("%s:%d: %s\n", file.c_str(), line, message.c_str());
  }

  fs::path root_;
  Table table_;
  std::map<std::string, std::set<std::string>> exported_;
  int violations_ = 0, files_ = 0, includes_ = 0;
};

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_layers ROOT (the table is ROOT/cmake/layers.txt)\n");
    return 2;
  }
  try {
    const fs::path root = fs::canonical(argv[1]);
    Checker checker(root, read_table(root / "cmake" / "layers.txt"));
    checker.check_folders();
    checker.check_tree();
    if (checker.violations() > 0) {
      std::printf("%d includes or headers break cmake/layers.txt\n", checker.violations());
      return 1;
    }
    std::printf("%d includes in %d files follow cmake/layers.txt\n", checker.includes(),
                checker.files());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
