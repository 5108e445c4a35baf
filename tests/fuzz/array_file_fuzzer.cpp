// libFuzzer harness of the native array file (io::read_array): the input is the file, read as
// every element type, 1-D and 2-D (the header names one; the others must be refused cleanly).
#include "fuzz_support.hpp"
#include "tessera/io/array_file.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

template <typename T> void read_both_ways(const std::string& path) {
  for (const bool two_dim : {false, true}) {
    tessera::fuzz::expect_only_tessera_errors([&] { tessera::io::read_array<T>(path, two_dim); });
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  const std::string path = fuzz::scratch_dir() + "/input.bin";
  fuzz::write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  read_both_ways<std::int32_t>(path);
  read_both_ways<std::int64_t>(path);
  read_both_ways<float>(path);
  read_both_ways<std::uint8_t>(path);
  return 0;
}
