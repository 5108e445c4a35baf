// Progress of long steps (reading a file, partitioning, writing a store): library code reports it,
// and an app that wants to show it listens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tessera {

/// One report of a long step (a stage). Its views belong to the stage and are valid during the
/// sink's call only: a sink that keeps them keeps copies.
struct ProgressEvent {
  enum class Kind {
    Begin,   ///< the stage started
    Advance, ///< `done` moved on
    End,     ///< the stage finished
    Abandon, ///< the stage was left by an exception
  };
  Kind kind = Kind::Begin;
  std::string_view stage; ///< what is being done, e.g. "reading edge.csv.gz"
  std::string_view unit;  ///< the unit of `done` and `total`: "bytes", "tiles"; empty for none
  std::int64_t done = 0;
  std::int64_t total = 0; ///< 0 when the amount is not known in advance
};

using ProgressSink = std::function<void(const ProgressEvent&)>;

/// Sends the progress that library calls on the calling thread report to `sink` while the scope
/// lives; the sink installed before comes back when it ends. Progress belongs to a thread, so that
/// OpenMP workers and helper threads report nothing and a sink needs no lock of its own; stages
/// begun in a scope end in it.
class ProgressScope {
public:
  explicit ProgressScope(ProgressSink sink);
  ~ProgressScope();
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;

private:
  ProgressSink sink_;
  const ProgressSink* previous_;
};

/// A long step reporting to the calling thread's sink (doing nothing without one): Begin when it
/// is made, Advance on advance(), End on finish() or when it goes out of scope normally, Abandon
/// when an exception unwinds it.
class ProgressStage {
public:
  /// `total` units of `unit` to do (0: not known).
  explicit ProgressStage(std::string stage, std::int64_t total = 0, std::string unit = {});
  ~ProgressStage();
  ProgressStage(const ProgressStage&) = delete;
  ProgressStage& operator=(const ProgressStage&) = delete;

  /// Reports `done` units done so far.
  void advance(std::int64_t done);
  /// Ends the stage now (later calls do nothing).
  void finish();

private:
  void send(ProgressEvent::Kind kind) const;

  const ProgressSink* sink_;
  std::string stage_;
  std::string unit_;
  std::int64_t total_;
  std::int64_t done_ = 0;
  int exceptions_at_begin_;
};

} // namespace tessera
