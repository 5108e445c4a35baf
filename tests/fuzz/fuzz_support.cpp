// Scratch files, input splitting and the template store of the libFuzzer harnesses.
#include "fuzz_support.hpp"

#include "tessera/datasets/dataset.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera/partition/store.hpp"
#include "tessera/runtime/checkpoint.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <unistd.h>

namespace tessera::fuzz {
namespace {

namespace fs = std::filesystem;

/// Removes the scratch folder when the process exits normally (libFuzzer's -runs/-max_total_time
/// end, or a finding that exits rather than aborts).
struct ScratchFolder {
  std::string path;
  ScratchFolder() {
    const char* tmp = std::getenv("TMPDIR");
    fs::path base = tmp != nullptr && *tmp != '\0' ? fs::path(tmp)
                    : fs::is_directory("/dev/shm") ? fs::path("/dev/shm")
                                                   : fs::path("/tmp");
    path = (base / ("tessera-fuzz-" + std::to_string(::getpid()))).string();
    std::error_code ec;
    fs::remove_all(path, ec);
    fs::create_directories(path, ec);
    if (ec) {
      std::fprintf(stderr, "fuzz harness: cannot create scratch folder %s: %s\n", path.c_str(),
                   ec.message().c_str());
      std::abort();
    }
  }
  ~ScratchFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

} // namespace

const std::string& scratch_dir() {
  static const ScratchFolder folder;
  return folder.path;
}

void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
}

std::vector<std::string_view> split_files(const std::uint8_t* data, std::size_t size,
                                          std::size_t count) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> pieces;
  while (pieces.size() + 1 < count) {
    const std::size_t at = rest.find(kFileSeparator);
    if (at == std::string_view::npos) break;
    pieces.push_back(rest.substr(0, at));
    rest.remove_prefix(at + kFileSeparator.size());
  }
  pieces.push_back(rest);
  pieces.resize(count);
  return pieces;
}

const BackendPtr& cpu() {
  static const BackendPtr backend = make_cpu_backend(1);
  return backend;
}

void write_small_store(const std::string& dir) {
  datasets::LoadOptions options;
  options.seed = 7;
  datasets::Dataset dataset = datasets::load_dataset(
      cpu(), "sbm:nodes=40,classes=3,avg-degree=4,p-in=0.8,features=5,noise=1.0", options);
  if (!dataset.has_split()) datasets::make_random_split(dataset, 0.6, 0.2, 7);
  partition::Options cut;
  cut.num_parts = 2;
  cut.method = partition::Method::Block;
  const partition::Partition parts = partition::partition_graph(dataset.adjacency, cut);
  partition::write_store(dir, dataset, parts, cut, partition::Reorder::None,
                         partition::measure(dataset.adjacency, parts));
}

void write_small_checkpoint(const std::string& dir) {
  runtime::Checkpoint checkpoint;
  checkpoint.run.dataset = "fuzz";
  checkpoint.run.num_nodes = 10;
  checkpoint.run.features = 3;
  checkpoint.run.classes = 2;
  checkpoint.run.model_name = "gcn";
  checkpoint.run.layer_sizes = {3, 4, 2};
  checkpoint.run.epochs = 10;
  gnn::TrainState& state = checkpoint.state;
  state.epoch = 5;
  state.adam_steps = 5;
  state.best_epoch = 4;
  // [rows, cols] weights and a [1, cols] bias per layer; values distinct so a mix-up shows.
  const auto parameter = [](const char* name, std::int64_t rows, std::int64_t cols) {
    gnn::ParameterState p;
    p.name = name;
    p.rows = rows;
    p.cols = cols;
    for (std::int64_t i = 0; i < rows * cols; ++i) {
      p.value.push_back(0.1f * static_cast<float>(i));
      p.adam_m.push_back(0.01f * static_cast<float>(i));
      p.adam_v.push_back(0.001f * static_cast<float>(i));
    }
    return p;
  };
  state.parameters = {parameter("gcn0.weight", 3, 4), parameter("gcn0.bias", 1, 4),
                      parameter("gcn1.weight", 4, 2), parameter("gcn1.bias", 1, 2)};
  std::filesystem::create_directories(dir);
  runtime::write_checkpoint(dir, checkpoint);
}

} // namespace tessera::fuzz
