// Writes the seeds the fuzz harnesses cannot take from ../shared/datasets, where no such file is
// published: a small .npz written by save_npz, native array files, a store's manifest.json and
// part.json, and a checkpoint's checkpoint.json and latest.json.
// Usage: tessera_fuzz_seeds OUT_DIR (creates
// OUT_DIR/{npz,array_file,manifest,part_json,checkpoint}).
#include "fuzz_support.hpp"
#include "tessera/datasets/dataset.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace tessera;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const fs::path out = argv[1];
    for (const char* corpus : {"npz", "array_file", "manifest", "part_json", "checkpoint"})
      fs::create_directories(out / corpus);

    const std::string store = fuzz::scratch_dir() + "/store";
    fuzz::write_small_store(store);
    const fs::path part = fs::path(store) / "part-00000";
    fs::copy_file(fs::path(store) / "manifest.json", out / "manifest" / "small_store.json",
                  fs::copy_options::overwrite_existing);
    fs::copy_file(part / "part.json", out / "part_json" / "small_store.json",
                  fs::copy_options::overwrite_existing);
    for (const auto& entry : fs::directory_iterator(part)) {
      if (entry.path().extension() == ".bin") {
        fs::copy_file(entry.path(), out / "array_file" / entry.path().filename(),
                      fs::copy_options::overwrite_existing);
      }
    }

    const fs::path checkpoint = fs::path(fuzz::scratch_dir()) / "checkpoint";
    fuzz::write_small_checkpoint(checkpoint.string());
    const auto text = [](const fs::path& path) {
      std::ifstream in(path, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    fuzz::write_bytes((out / "checkpoint" / "small_checkpoint").string(),
                      text(checkpoint / fuzz::kSmallCheckpointFolder / "checkpoint.json") +
                          std::string(fuzz::kFileSeparator) + text(checkpoint / "latest.json"));

    datasets::LoadOptions options;
    options.seed = 3;
    const datasets::Dataset dense = datasets::load_dataset(
        fuzz::cpu(), "sbm:nodes=12,classes=2,avg-degree=3,p-in=0.9,features=3,noise=1.0", options);
    datasets::save_npz(dense, (out / "npz" / "small_sbm.npz").string());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
