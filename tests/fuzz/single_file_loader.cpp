// libFuzzer harness of a one-file dataset format: the input is the file, loaded as
// "TESSERA_FUZZ_FORMAT:PATH" through datasets::load_dataset (npz, METIS graph, Matrix Market).
#include "fuzz_support.hpp"
#include "tessera/datasets/dataset.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#ifndef TESSERA_FUZZ_FORMAT
#error "define TESSERA_FUZZ_FORMAT (the load_dataset format prefix, e.g. npz)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  const std::string path = fuzz::scratch_dir() + "/input." TESSERA_FUZZ_FORMAT;
  fuzz::write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::expect_only_tessera_errors(
      [&] { datasets::load_dataset(fuzz::cpu(), TESSERA_FUZZ_FORMAT ":" + path, {}); });
  return 0;
}
