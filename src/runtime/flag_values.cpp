// The values of flags: text → the library's typed settings. Every refusal names the flag, the
// text and the form it takes; the library checks the settings again, naming settings.
#include "tessera/core/error.hpp"
#include "tessera/partition/partition.hpp"
#include "tessera/runtime/cli_options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fmt/core.h>
#include <limits>
#include <stdexcept>
#include <string_view>

namespace tessera::runtime {

std::size_t parse_byte_size(const std::string& text, const std::string& flag) {
  const auto bad = [&] {
    return InvalidArgument(flag + ": '" + text +
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

std::vector<std::int64_t> parse_layer_sizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  while (p < end) {
    std::int64_t value = 0;
    const auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc() || value <= 0 || (next != end && *next != '-')) {
      throw InvalidArgument("--layers '" + text +
                            "': expects positive integers joined by '-', like 1433-16-7");
    }
    // A width is a column count of 32-bit ids; products of widths then stay far from wrapping.
    if (value > gnn::kMaxLayerWidth) {
      throw InvalidArgument("--layers '" + text + "': width " + std::to_string(value) +
                            " is above the largest a layer may have, 2^31 - 1");
    }
    sizes.push_back(value);
    p = next == end ? end : next + 1;
  }
  if (sizes.size() < 2) {
    throw InvalidArgument("--layers '" + text + "': expects at least an input and an output size");
  }
  return sizes;
}

DeviceChoice parse_device_choice(const std::string& text) {
  if (text == "cpu") return DeviceChoice::Cpu;
  if (text == "cuda") return DeviceChoice::Cuda;
  if (text == "auto") return DeviceChoice::Auto;
  throw InvalidArgument("--device '" + text + "': expects cpu, cuda or auto");
}

comm::LinkModel parse_link_model(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("--simulate-link '" + text + "': " + why +
                           "; expects GBPS[:LATENCY_US], e.g. 10 or 10:5 (10 Gb/s, 5 µs)");
  };
  const auto number = [&](const std::string& part, const char* what) {
    std::size_t used = 0;
    double value = 0;
    try {
      value = std::stod(part, &used);
    } catch (const std::exception&) {
      throw bad(fmt::format("the {} '{}' is not a number", what, part));
    }
    if (used != part.size() || !std::isfinite(value)) {
      throw bad(fmt::format("the {} '{}' is not a number", what, part));
    }
    return value;
  };
  const auto colon = text.find(':');
  comm::LinkModel link;
  link.gigabits_per_second = number(text.substr(0, colon), "bandwidth");
  if (colon != std::string::npos) link.latency_us = number(text.substr(colon + 1), "latency");
  if (link.gigabits_per_second <= 0) throw bad("the bandwidth must be above 0 Gb/s");
  if (link.latency_us < 0) throw bad("the latency must not be negative");
  return link;
}

std::vector<double> parse_number_list(const std::string& text, const std::string& flag,
                                      bool zero_allowed, const std::string& example) {
  const char* kind = zero_allowed ? "numbers >= 0" : "positive numbers";
  const auto fail = [&](const std::string& why) {
    return InvalidArgument(fmt::format("{} '{}': {}; expected comma-separated {} such as {}", flag,
                                       text, why, kind, example));
  };
  if (text.empty()) throw fail("empty");
  std::vector<double> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item(text.data() + start, end - start);
    double value = 0.0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      throw fail(fmt::format("item {} ('{}') is not a number", values.size() + 1, item));
    }
    if (!std::isfinite(value) || value < 0.0 || (value == 0.0 && !zero_allowed)) {
      throw fail(fmt::format("item {} ({}) is not {}", values.size() + 1, value,
                             zero_allowed ? "finite and >= 0" : "positive"));
    }
    values.push_back(value);
    start = end + 1;
  }
  return values;
}

std::vector<double> parse_part_weights(const std::string& text, const std::string& flag) {
  const std::vector<double> weights = parse_number_list(text, flag, false, "2,1,1,1");
  // What a cut can use of them is the library's check, before anything is loaded.
  check_flags(fmt::format("{} '{}'", flag, text), [&] { partition::check_part_weights(weights); });
  return weights;
}

std::string error_text(const std::exception& e) {
  if (dynamic_cast<const OutputExists*>(&e) != nullptr) {
    return std::string(e.what()) + "; pass --force to replace it";
  }
  if (dynamic_cast<const PeerTimeout*>(&e) != nullptr) {
    return std::string(e.what()) + "; --peer-timeout sets it";
  }
  return e.what();
}

namespace {

/// "R:X" (a rank and a number, the whole text) → {R, X}; anything else throws InvalidArgument
/// with `what_is_expected` (the flag, the text and the form it takes). Ranges are checked with
/// the job's ranks.
std::pair<int, double> parse_rank_and_number(const std::string& text,
                                             const std::string& what_is_expected) {
  const auto colon = text.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    std::size_t rank_end = 0, number_end = 0;
    const int rank = std::stoi(text.substr(0, colon), &rank_end);
    const double number = std::stod(text.substr(colon + 1), &number_end);
    if (rank_end != colon || number_end != text.size() - colon - 1) {
      throw std::invalid_argument("trailing text");
    }
    return {rank, number};
  } catch (const std::exception&) {
    throw InvalidArgument(what_is_expected);
  }
}

} // namespace

std::pair<int, double> parse_rank_speed(const std::string& text) {
  return parse_rank_and_number(text, "--simulate-rank-speed '" + text +
                                         "': expects RANK:FACTOR, e.g. 1:0.25 (rank 1 at a "
                                         "quarter speed)");
}

std::pair<int, int> parse_failure(const std::string& text) {
  const std::string expected = "--inject-failure expects RANK:EPOCH, got '" + text + "'";
  const auto [rank, epoch] = parse_rank_and_number(text, expected);
  if (epoch != std::floor(epoch) || std::abs(epoch) > 1e9) throw InvalidArgument(expected);
  return {rank, static_cast<int>(epoch)};
}

Schedule parse_schedule(const std::string& text) {
  for (const Schedule s : {Schedule::Fixed, Schedule::Auto}) {
    if (text == to_string(s)) return s;
  }
  throw InvalidArgument("--schedule '" + text + "': expects fixed or auto");
}

void parse_allowed_inexact(const std::string& text, std::vector<comm::HaloMode>& modes,
                           std::vector<comm::HaloPrecision>& precisions) {
  std::size_t begin = 0;
  while (begin <= text.size() && !text.empty()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string word = text.substr(begin, end - begin);
    if (word == "stale") {
      modes.push_back(comm::HaloMode::Stale);
    } else if (word == "skip") {
      modes.push_back(comm::HaloMode::Skip);
    } else if (word == "bf16") {
      precisions.push_back(comm::HaloPrecision::Bf16);
    } else if (word == "int8") {
      precisions.push_back(comm::HaloPrecision::Int8);
    } else {
      throw InvalidArgument("--allow-inexact '" + text + "': unknown '" + word +
                            "'; expects a comma-separated list of stale, skip, bf16, int8");
    }
    begin = end + 1;
  }
}

} // namespace tessera::runtime
