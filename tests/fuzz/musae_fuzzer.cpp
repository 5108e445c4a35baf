// libFuzzer harness of the MUSAE loader: the input is PREFIX_edges.csv, PREFIX_target.csv and
// PREFIX.json joined by fuzz::kFileSeparator, loaded as "musae:PREFIX_edges.csv".
#include "fuzz_support.hpp"
#include "tessera/datasets/dataset.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  const auto files = fuzz::split_files(data, size, 3);
  const std::string prefix = fuzz::scratch_dir() + "/input";
  fuzz::write_bytes(prefix + "_edges.csv", files[0]);
  fuzz::write_bytes(prefix + "_target.csv", files[1]);
  fuzz::write_bytes(prefix + ".json", files[2]);
  fuzz::expect_only_tessera_errors(
      [&] { datasets::load_dataset(fuzz::cpu(), "musae:" + prefix + "_edges.csv", {}); });
  return 0;
}
