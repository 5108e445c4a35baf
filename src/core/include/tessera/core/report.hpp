// A JSON document built by dotted keys: how a run summary is written out as a report
// (runtime/run_summary.hpp). Write-only: figures are kept in typed structs, not read back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

/// Peak resident set size of this process so far (or since reset_peak_rss), in bytes (Linux's
/// VmHWM; getrusage elsewhere).
std::int64_t peak_rss_bytes();

/// Restarts the peak from the memory resident now, so that a benchmark's figure leaves out what
/// came and went before (Linux: writes 5 to /proc/self/clear_refs). False where that is refused.
bool reset_peak_rss();

/// A tree of values addressed by dotted keys ("train.epochs"), written as JSON.
class RunReport {
 public:
  /// An empty report. Move-only.
  RunReport();
  ~RunReport();
  RunReport(RunReport&&) noexcept;
  RunReport& operator=(RunReport&&) noexcept;

  /// Stores `value` at `key`, creating the objects on the dotted path and replacing any value
  /// already there. Vectors are stored as JSON arrays.
  void set(std::string_view key, double value);
  void set(std::string_view key, std::int64_t value);
  void set(std::string_view key, int value) { set(key, static_cast<std::int64_t>(value)); }
  void set(std::string_view key, bool value);
  void set(std::string_view key, const std::string& value);
  void set(std::string_view key, const char* value) { set(key, std::string(value)); }
  void set(std::string_view key, const std::vector<double>& values);
  /// Appends a JSON object given as (name, value) pairs to the array at `key` (created, or
  /// replacing a value that is not an array).
  void append(std::string_view key, const std::vector<std::pair<std::string, double>>& fields);

  /// The report as indented JSON text.
  std::string dump() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
