// Writes the seeds the fuzz harnesses cannot take from ../shared/datasets, where no such file is
// published: a small .npz written by save_npz, native array files, a store's manifest.json and
// part.json, and a checkpoint's checkpoint.json and latest.json; and hand-built .npz archives next
// to the checks of issue 37 (a shape whose product overflows, two members of one name, a local
// name that differs from the directory's, booleans where ids belong, masks of several splits),
// from which the fuzzer's mutations start.
// Usage: tessera_fuzz_seeds OUT_DIR (creates
// OUT_DIR/{npz,array_file,manifest,part_json,checkpoint}).
#include "fuzz_support.hpp"
#include "tessera/datasets/dataset.hpp"
#include "unit/datasets/npz_bytes.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using tessera::datasets::tests::bytes_of;
using tessera::datasets::tests::Member;
using tessera::datasets::tests::npz_bytes;

Member i64(const std::string& key, const std::vector<std::int64_t>& values) {
  std::string shape = "(";
  shape += std::to_string(values.size());
  shape += ",)";
  return {key, "<i8", shape, bytes_of(values)};
}

/// A path graph of three nodes in Planetoid keys, with `extra` members after it.
std::string path_graph(const std::vector<Member>& extra) {
  std::vector<Member> members = {
      i64("adj_indptr", {0, 1, 3, 4}),
      i64("adj_indices", {1, 0, 2, 1}),
      {"features", "<f4", "(3, 1)", bytes_of(std::vector<float>{1, 2, 3})},
      i64("labels", {0, 1, 0})};
  members.insert(members.end(), extra.begin(), extra.end());
  return npz_bytes(members);
}

void write_hostile_npz_seeds(const std::filesystem::path& dir) {
  using tessera::fuzz::write_bytes;
  write_bytes(
      (dir / "overflowing_shape.npz").string(),
      path_graph({{"train_idx", "<i8", "(200, 4611686018427387904)", ""}, i64("test_idx", {2})}));
  write_bytes((dir / "two_members_one_name.npz").string(),
              path_graph({i64("train_idx", {0}), i64("test_idx", {2}), i64("train_idx", {0, 1})}));
  write_bytes((dir / "boolean_ids.npz").string(),
              path_graph({{"train_idx", "|b1", "(3,)", std::string("\x01\x01\x00", 3)},
                          i64("test_idx", {2})}));
  std::string renamed = path_graph({i64("train_idx", {0}), i64("test_idx", {2})});
  renamed.replace(renamed.find("labels.npy"), 10, "lobels.npy");
  write_bytes((dir / "local_name_differs.npz").string(), renamed);
  write_bytes(
      (dir / "masks_of_two_splits.npz").string(),
      path_graph({{"train_masks", "|b1", "(2, 3)", std::string("\x01\x00\x00\x00\x01\x00", 6)},
                  {"val_masks", "|b1", "(2, 3)", std::string(6, '\0')},
                  {"test_masks", "|b1", "(2, 3)", std::string("\x00\x01\x01\x01\x00\x01", 6)}}));
}

} // namespace

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
    write_hostile_npz_seeds(out / "npz");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
