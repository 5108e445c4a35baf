// Flags checked as they are parsed: ranges said plainly, seeds that do not wrap, paths that are
// not empty.
#include "tessera/runtime/cli_options.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <fmt/core.h>
#include <limits>

namespace tessera::runtime {

std::string bound_text(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  const double magnitude = std::abs(value);
  const std::string sign = value < 0 ? "-" : "";
  if (magnitude >= 1 << 20 && magnitude == std::floor(magnitude)) {
    const int two = static_cast<int>(std::lround(std::log2(magnitude)));
    if (std::ldexp(1.0, two) == magnitude) return sign + "2^" + std::to_string(two);
    const int ten = static_cast<int>(std::lround(std::log10(magnitude)));
    if (std::pow(10.0, ten) == magnitude) return sign + "10^" + std::to_string(ten);
  }
  return fmt::format("{:g}", value);
}

namespace {

/// The integer `text` is, the whole of it; nullopt for anything else (a fraction, "1e3", words).
std::optional<std::int64_t> whole_integer(const std::string& text) {
  std::int64_t value = 0;
  const char* begin = text.data();
  if (!text.empty() && text.front() == '+') ++begin;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || ptr != end || begin == end) return std::nullopt;
  return value;
}

CLI::Validator integer_range(std::int64_t low, std::int64_t high) {
  const std::string what = "an integer in [" + bound_text(static_cast<double>(low)) + ", " +
                           bound_text(static_cast<double>(high)) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::optional<std::int64_t> value = whole_integer(text);
        if (value && *value >= low && *value <= high) return {};
        return "expects " + what + ", got '" + text + "'";
      },
      what);
}

CLI::Validator number_range(double low, bool low_open, double high) {
  const std::string what = std::string("a number in ") + (low_open ? "(" : "[") + bound_text(low) +
                           ", " + bound_text(high) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0.0;
        const char* end = text.data() + text.size();
        const auto [ptr, error] = std::from_chars(text.data(), end, value);
        const bool ok = error == std::errc() && ptr == end && !text.empty() &&
                        std::isfinite(value) && (low_open ? value > low : value >= low) &&
                        value <= high;
        return ok ? std::string() : "expects " + what + ", got '" + text + "'";
      },
      what);
}

CLI::Validator seed_range() {
  const std::string what = "an integer in [0, 2^64 - 1]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, error] = std::from_chars(text.data(), end, value);
        // from_chars of an unsigned type refuses a sign and a value beyond 2^64 - 1.
        if (error == std::errc() && ptr == end && !text.empty()) return {};
        return "expects " + what + ", got '" + text + "'";
      },
      what);
}

template <typename T>
CLI::Option* add_integer(CLI::App& app, const std::string& name, T& value, std::int64_t low,
                         std::int64_t high, const std::string& description) {
  return app.add_option(name, value, description)->check(integer_range(low, high));
}

template <typename T>
CLI::Option* add_number(CLI::App& app, const std::string& name, T& value, double low, bool low_open,
                        double high, const std::string& description) {
  return app.add_option(name, value, description)->check(number_range(low, low_open, high));
}

} // namespace

CLI::Option* add_integer_option(CLI::App& app, const std::string& name, int& value,
                                std::int64_t low, std::int64_t high,
                                const std::string& description) {
  return add_integer(app, name, value, low, high, description);
}

CLI::Option* add_integer_option(CLI::App& app, const std::string& name, std::int64_t& value,
                                std::int64_t low, std::int64_t high,
                                const std::string& description) {
  return add_integer(app, name, value, low, high, description);
}

CLI::Option* add_number_option(CLI::App& app, const std::string& name, double& value, double low,
                               bool low_open, double high, const std::string& description) {
  return add_number(app, name, value, low, low_open, high, description);
}

CLI::Option* add_number_option(CLI::App& app, const std::string& name, float& value, double low,
                               bool low_open, double high, const std::string& description) {
  return add_number(app, name, value, low, low_open, high, description);
}

CLI::Option* add_number_option(CLI::App& app, const std::string& name, std::optional<double>& value,
                               double low, bool low_open, double high,
                               const std::string& description) {
  return add_number(app, name, value, low, low_open, high, description);
}

CLI::Option* add_seed_option(CLI::App& app, const std::string& name, std::uint64_t& value,
                             const std::string& description) {
  return app.add_option(name, value, description)->check(seed_range());
}

CLI::Option* add_seed_option(CLI::App& app, const std::string& name,
                             std::optional<std::uint64_t>& value, const std::string& description) {
  return app.add_option(name, value, description)->check(seed_range());
}

CLI::Option* add_path_option(CLI::App& app, const std::string& name, std::string& value,
                             const std::string& description) {
  return app.add_option(name, value, description)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text.empty() ? "expects a path, got an empty string" : std::string();
          },
          "PATH"));
}

void add_split_overlap_flag(CLI::App& app, bool& value) {
  app.add_flag("--allow-split-overlap", value,
               "accept a stored split whose train, val and test parts share nodes (refused by "
               "default: accuracy on trained nodes means nothing)");
}

void start_everyday_flags(CLI::App& app) {
  app.option_defaults()->group(kEverydayFlags);
  app.get_help_ptr()->group(kEverydayFlags);
}

void group_flags(CLI::App& app, const char* group, std::initializer_list<const char*> names) {
  for (const char* name : names)
    app.get_option(name)->group(group);
}

} // namespace tessera::runtime
