// RunReport on nlohmann::json.
#include "tessera/core/report.hpp"

#include "tessera/core/error.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

namespace tessera {

std::int64_t peak_rss_bytes() {
  // VmHWM, which reset_peak_rss restarts; getrusage where there is no /proc.
  if (std::FILE* status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    long long kib = -1;
    while (std::fgets(line, sizeof line, status) != nullptr) {
      if (std::sscanf(line, "VmHWM: %lld kB", &kib) == 1) break;
    }
    std::fclose(status);
    if (kib >= 0) return static_cast<std::int64_t>(kib) * 1024;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool written = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && written;
}

struct RunReport::Impl {
  nlohmann::json root = nlohmann::json::object();

  nlohmann::json& at(std::string_view key) {
    nlohmann::json* node = &root;
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = key.find('.', start);
      const std::string part(key.substr(start, dot - start));
      if (!node->is_null() && !node->is_object()) {
        throw InvalidArgument("report key '" + std::string(key) + "': '" +
                              std::string(key.substr(0, start == 0 ? 0 : start - 1)) +
                              "' already holds a value, not a group");
      }
      node = &(*node)[part];
      if (dot == std::string_view::npos) return *node;
      start = dot + 1;
    }
  }
};

RunReport::RunReport() : impl_(std::make_unique<Impl>()) {}
RunReport::~RunReport() = default;
RunReport::RunReport(RunReport&&) noexcept = default;
RunReport& RunReport::operator=(RunReport&&) noexcept = default;

void RunReport::set(std::string_view key, double value) { impl_->at(key) = value; }
void RunReport::set(std::string_view key, std::int64_t value) { impl_->at(key) = value; }
void RunReport::set(std::string_view key, bool value) { impl_->at(key) = value; }
void RunReport::set(std::string_view key, const std::string& value) { impl_->at(key) = value; }
void RunReport::set(std::string_view key, const std::vector<double>& values) {
  impl_->at(key) = values;
}

void RunReport::append(std::string_view key,
                       const std::vector<std::pair<std::string, double>>& fields) {
  nlohmann::json& array = impl_->at(key);
  if (!array.is_array()) array = nlohmann::json::array();
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [name, value] : fields) object[name] = value;
  array.push_back(std::move(object));
}

// A dataset path need not be UTF-8 (file names are bytes): its bad bytes become U+FFFD rather
// than an exception after hours of training.
std::string RunReport::dump() const {
  return impl_->root.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tessera
