// libFuzzer harness of the SNAP edge-list loader: the input is an edge list, optionally followed
// (after fuzz::kFileSeparator) by a `node label` file. The edge list alone is loaded as
// "snap:PATH"; with labels, both are laid out as the email-eu-core dataset and loaded by name,
// which reads the labels too.
#include "fuzz_support.hpp"
#include "tessera/datasets/dataset.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  const auto files = fuzz::split_files(data, size, 2);
  const std::string root = fuzz::scratch_dir();
  const std::string folder = root + "/email_eu_core";
  static const bool made = std::filesystem::create_directories(folder);
  (void)made;
  // gzopen reads plain text as it is, so the .gz name the dataset layout expects is harmless.
  const std::string edges = folder + "/email-Eu-core.txt.gz";
  fuzz::write_bytes(edges, files[0]);
  fuzz::expect_only_tessera_errors(
      [&] { datasets::load_dataset(fuzz::cpu(), "snap:" + edges, {}); });
  if (!files[1].empty()) {
    fuzz::write_bytes(folder + "/email-Eu-core-department-labels", files[1]);
    datasets::LoadOptions options;
    options.data_dir = root;
    fuzz::expect_only_tessera_errors(
        [&] { datasets::load_dataset(fuzz::cpu(), "email-eu-core", options); });
  }
  return 0;
}
