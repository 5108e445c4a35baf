// compare_reports ONE.json MANY.json: exits 0 when the two run reports (tessera-train --report)
// have the same epochs with training and validation losses within 1e-5 relative and accuracies
// within 1e-9, else prints the first difference and exits 1. Used by the end-to-end tests.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

nlohmann::json read(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  return nlohmann::json::parse(in);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: compare_reports ONE.json MANY.json\n");
    return 2;
  }
  try {
    const nlohmann::json one = read(argv[1]).at("epochs");
    const nlohmann::json many = read(argv[2]).at("epochs");
    if (one.size() != many.size() || one.empty()) {
      std::printf("%zu epochs against %zu\n", one.size(), many.size());
      return 1;
    }
    for (std::size_t e = 0; e < one.size(); ++e) {
      for (const char* key : {"loss", "val_loss", "train_accuracy", "val_accuracy",
                              "test_accuracy"}) {
        const double a = one[e].at(key).get<double>(), b = many[e].at(key).get<double>();
        const double tolerance = std::string(key).ends_with("loss") ? 1e-5 * std::abs(a) : 1e-9;
        if (!(std::abs(a - b) <= tolerance)) {
          std::printf("epoch %zu %s: %.9g against %.9g\n", e + 1, key, a, b);
          return 1;
        }
      }
    }
    std::printf("%zu epochs agree; final loss %.9g and %.9g\n", one.size(),
                one.back().at("loss").get<double>(), many.back().at("loss").get<double>());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
