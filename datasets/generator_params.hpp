// The "key=value,key=value" parameters of a dataset generator spec (rmat:, sbm:, blobs:), parsed
// and range-checked in one place so every generator refuses bad input the same way.
#pragma once

#include "tessera/core/error.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::datasets::detail {

/// "key=value,key=value" parameters of a generator; unknown, repeated and malformed keys throw
/// InvalidArgument naming the key and the valid ones.
class GeneratorParams {
public:
  GeneratorParams(std::string generator, std::string_view text, std::vector<std::string> valid)
      : generator_(std::move(generator)), valid_(std::move(valid)) {
    std::size_t start = 0;
    while (start <= text.size() && !text.empty()) {
      const std::size_t end = std::min(text.find(',', start), text.size());
      const std::string_view item = text.substr(start, end - start);
      const std::size_t eq = item.find('=');
      const std::string key(item.substr(0, eq));
      if (std::find(valid_.begin(), valid_.end(), key) == valid_.end()) {
        fail("unknown " + generator_ + " parameter '" + key + "'");
      }
      if (eq == std::string_view::npos)
        fail(generator_ + " parameter '" + key + "' needs a value (" + key + "=VALUE)");
      if (!values_.emplace(key, std::string(item.substr(eq + 1))).second) {
        fail(generator_ + " parameter '" + key + "' is given twice");
      }
      start = end + 1;
    }
  }

  /// Whether the spec gives `key`.
  bool has(const std::string& key) const { return values_.count(key) > 0; }

  std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t min,
                       std::int64_t max) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    std::int64_t value = 0;
    const char* end = it->second.data() + it->second.size();
    const auto [ptr, ec] = std::from_chars(it->second.data(), end, value);
    if (ec != std::errc{} || ptr != end || it->second.empty()) {
      fail(generator_ + " parameter '" + key + "' expects an integer, got '" + it->second + "'");
    }
    if (value < min || value > max) {
      fail(generator_ + " parameter '" + key + "' must be in [" + std::to_string(min) + ", " +
           std::to_string(max) + "], got " + it->second);
    }
    return value;
  }

  double real(const std::string& key, double fallback, double min, double max) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    double value = 0.0;
    const char* end = it->second.data() + it->second.size();
    const auto [ptr, ec] = std::from_chars(it->second.data(), end, value);
    if (ec != std::errc{} || ptr != end || it->second.empty() || !std::isfinite(value)) {
      fail(generator_ + " parameter '" + key + "' expects a number, got '" + it->second + "'");
    }
    if (value < min || value > max) {
      fail(generator_ + " parameter '" + key + "' must be in [" + format(min) + ", " + format(max) +
           "], got " + it->second);
    }
    return value;
  }

  static std::string format(double value) {
    char buffer[32];
    const auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, ptr);
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    std::string list;
    for (const auto& key : valid_)
      list += (list.empty() ? "" : ", ") + key;
    throw InvalidArgument(what + "; valid " + generator_ + " parameters: " + list);
  }

  std::string generator_;
  std::vector<std::string> valid_;
  std::map<std::string, std::string> values_;
};

} // namespace tessera::datasets::detail
