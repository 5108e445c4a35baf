// libFuzzer harness of runtime::read_checkpoint: a small valid checkpoint is written once; each
// input is its checkpoint.json, optionally followed (after fuzz::kFileSeparator) by its
// latest.json (else the valid one is put back), and the checkpoint folder is read.
#include "fuzz_support.hpp"
#include "tessera/runtime/checkpoint.hpp"

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

namespace {

struct Template {
  std::string dir, latest;
};

const Template& checkpoint() {
  static const Template made = [] {
    Template t;
    t.dir = tessera::fuzz::scratch_dir() + "/checkpoint";
    tessera::fuzz::write_small_checkpoint(t.dir);
    std::ifstream in(t.dir + "/latest.json", std::ios::binary);
    t.latest.assign(std::istreambuf_iterator<char>(in), {});
    return t;
  }();
  return made;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  const Template& t = checkpoint();
  const auto files = fuzz::split_files(data, size, 2);
  fuzz::write_bytes(t.dir + "/" + std::string(fuzz::kSmallCheckpointFolder) + "/checkpoint.json",
                    files[0]);
  fuzz::write_bytes(t.dir + "/latest.json", files[1].empty() ? t.latest : files[1]);
  fuzz::expect_only_tessera_errors([&] { runtime::read_checkpoint(t.dir); });
  return 0;
}
