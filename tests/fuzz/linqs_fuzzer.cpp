// libFuzzer harness of the LINQS loader: the input is NAME.content and NAME.cites joined by
// fuzz::kFileSeparator, loaded as "linqs:NAME.content".
#include "fuzz_support.hpp"
#include "tessera/datasets/dataset.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  const auto files = fuzz::split_files(data, size, 2);
  const std::string base = fuzz::scratch_dir() + "/input";
  fuzz::write_bytes(base + ".content", files[0]);
  fuzz::write_bytes(base + ".cites", files[1]);
  fuzz::expect_only_tessera_errors(
      [&] { datasets::load_dataset(fuzz::cpu(), "linqs:" + base + ".content", {}); });
  return 0;
}
