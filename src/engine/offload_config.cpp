// The chunk engine's settings as text: tensor kinds and policies by name, byte sizes ("64MiB")
// parsed and printed, and the ratios of its statistics.
#include "tessera/engine/chunk_manager.hpp"

#include "tessera/core/error.hpp"

#include <cmath>
#include <cstdint>
#include <string>

namespace tessera {

std::string to_string(TensorKind kind) {
  switch (kind) {
  case TensorKind::Input:
    return "input";
  case TensorKind::Matrix:
    return "matrix";
  case TensorKind::Activation:
    return "activation";
  case TensorKind::Gradient:
    return "gradient";
  case TensorKind::Weight:
    return "weight";
  case TensorKind::WeightGrad:
    return "weight-grad";
  case TensorKind::OptimizerState:
    return "optimizer-state";
  }
  return "unknown";
}

std::string to_string(EvictionPolicy policy) {
  return policy == EvictionPolicy::Lru ? "lru" : "farthest-next-use";
}

EvictionPolicy parse_eviction_policy(const std::string& text) {
  if (text == "lru") return EvictionPolicy::Lru;
  if (text == "farthest-next-use") return EvictionPolicy::FarthestNextUse;
  throw InvalidArgument("unknown eviction policy '" + text + "'; valid: lru, farthest-next-use");
}

std::size_t parse_byte_size(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return InvalidArgument(what + ": '" + text +
                           "' is not a byte size (a whole number with an optional unit K, M, G "
                           "or T, e.g. 512MiB or 2GiB)");
  };
  std::size_t end = 0;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9')
    ++end;
  if (end == 0 || end > 18) throw bad();
  const std::uint64_t number = std::stoull(text.substr(0, end));
  std::string unit = text.substr(end);
  if (unit.size() >= 2 && (unit.ends_with("iB") || unit.ends_with("ib"))) {
    unit = unit.substr(0, unit.size() - 2);
  } else if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b') && unit.size() == 2) {
    unit = unit.substr(0, 1);
  }
  int shift = 0;
  if (unit.empty() || unit == "B" || unit == "b")
    shift = 0;
  else if (unit == "K" || unit == "k")
    shift = 10;
  else if (unit == "M" || unit == "m")
    shift = 20;
  else if (unit == "G" || unit == "g")
    shift = 30;
  else if (unit == "T" || unit == "t")
    shift = 40;
  else
    throw bad();
  if (number > (std::numeric_limits<std::uint64_t>::max() >> shift)) throw bad();
  return static_cast<std::size_t>(number << shift);
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value == std::floor(value)) {
    std::snprintf(text, sizeof text, "%.0f %s", value, units[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  }
  return text;
}

double OffloadStats::hit_rate() const noexcept {
  return acquires == 0 ? 1.0 : static_cast<double>(hits) / static_cast<double>(acquires);
}

double OffloadStats::input_hit_rate() const noexcept {
  const std::uint64_t touches = input_hits + input_misses;
  return touches == 0 ? 1.0 : static_cast<double>(input_hits) / static_cast<double>(touches);
}

} // namespace tessera
