// libFuzzer harness of the partition store's JSON files: a small valid store is written once,
// then each input replaces one file of it (TESSERA_FUZZ_STORE_FILE: manifest.json, read by
// partition::read_manifest, or part-00000/part.json) and part 0 is loaded with
// partition::load_part, which reads both.
#include "fuzz_support.hpp"
#include "tessera/partition/store.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#ifndef TESSERA_FUZZ_STORE_FILE
#error "define TESSERA_FUZZ_STORE_FILE (the store file each input replaces)"
#endif

namespace {

const std::string& store() {
  static const std::string dir = [] {
    std::string path = tessera::fuzz::scratch_dir() + "/store";
    tessera::fuzz::write_small_store(path);
    return path;
  }();
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  fuzz::write_bytes(store() + "/" TESSERA_FUZZ_STORE_FILE,
                    std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::expect_only_tessera_errors([] { partition::read_manifest(store()); });
  fuzz::expect_only_tessera_errors([] { partition::load_part(store(), 0); });
  return 0;
}
