// Shows the progress of long steps (loading, partitioning, writing) as training shows its epochs:
// one line rewritten in place on a terminal, plain lines otherwise.
#pragma once

#include "tessera/core/progress.hpp"
#include "tessera/gnn/trainer.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace tessera::runtime {

struct ProgressDisplayOptions {
  /// Rewrite one line in place (a terminal) instead of writing plain lines (a log file, a pipe).
  bool terminal = false;
  /// Terminal: how often the line is redrawn, also while a call blocks (METIS reports nothing
  /// until it returns).
  std::chrono::milliseconds refresh{200};
  /// Plain lines: a stage still running this long after it began gets a line, then one more
  /// every `every`, and one when it ends; shorter stages print nothing.
  std::chrono::milliseconds first_line{2000};
  std::chrono::milliseconds every{30000};
};

/// The options for standard output: terminal when stdout is one and the job was not started by
/// mpirun (which hands every rank a pseudo-terminal even when the output goes to a file).
ProgressDisplayOptions stdout_progress_options();

/// Writes the progress the library reports to `out`: on a terminal the innermost running stage
/// ("reading edge.csv.gz: 45% of 267.0 MiB, 3.2 s"), redrawn every `refresh` and cleared when the
/// last stage ends, so what the program prints next starts on a clean line; otherwise plain lines
/// for long stages only. Listen with `ProgressScope scope(display.sink())` on the thread (and the
/// rank) that prints.
class ProgressDisplay {
public:
  explicit ProgressDisplay(std::FILE* out, ProgressDisplayOptions options);
  /// Stops the redrawing thread. Never throws.
  ~ProgressDisplay();
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  /// The sink to install; valid while the display lives.
  ProgressSink sink();

private:
  using Clock = std::chrono::steady_clock;
  struct Running {
    std::string stage;
    std::string unit;
    std::int64_t done = 0;
    std::int64_t total = 0;
    Clock::time_point began;
    Clock::time_point next_line; // plain lines: when the next one is due
    bool printed = false;        // plain lines: whether a line was written for it
  };

  void on_event(const ProgressEvent& event);
  /// Writes what is due at `now`; the caller holds mutex_.
  void show(Clock::time_point now);
  void redraw(Clock::time_point now);
  void clear_line();
  void ticker(std::stop_token stop);

  std::FILE* out_;
  ProgressDisplayOptions options_;
  std::mutex mutex_;
  std::vector<Running> running_; // outermost first
  Clock::time_point last_draw_{};
  std::size_t drawn_width_ = 0; // terminal: characters of the line on screen
  std::condition_variable_any wake_;
  std::jthread ticker_;
};

/// Shows the calling thread's progress on standard output while it lives when `show` is true (the
/// rank that prints), nothing otherwise: what a program's main makes first.
class StdoutProgress {
public:
  explicit StdoutProgress(bool show);

private:
  std::optional<ProgressDisplay> display_;
  std::optional<ProgressScope> scope_;
};

/// Prints a training program's epoch lines on standard output: one line rewritten in place on a
/// terminal, otherwise a plain line for the first and last epochs and every `log_every`-th
/// (flushed, so a log file of a long run shows each when it happens).
class EpochLinePrinter {
public:
  EpochLinePrinter(int epochs, int log_every);
  void operator()(int epoch, const std::string& line);

private:
  int epochs_;
  int log_every_;
  bool terminal_;
};

/// "45% of 267.0 MiB, 3.2 s", "3/8 tiles, 1.0 s", "running, 1.2 s": how far a stage is.
std::string describe_progress(std::int64_t done, std::int64_t total, const std::string& unit,
                              double seconds);

/// A split's metric for an epoch line: "AUC 0.8123" where ROC-AUC was measured, else " 81.23%".
std::string describe_split_metric(const gnn::SplitMetrics& m);

/// What a run that trained and has test rows reports last.
struct FinalResult {
  gnn::Metric metric = gnn::Metric::Accuracy;
  const gnn::SplitMetrics& test_at_best_val;
  const gnn::SplitMetrics& best_val;
  const gnn::SplitMetrics& final_test;
  int best_epoch = 0;
  bool has_validation = true; ///< false: best_epoch is the final epoch
};

/// The summary line of a run: "test accuracy 81.20% (epoch 112 of best validation accuracy
/// 79.60%); final test accuracy 80.90%", with ROC-AUC "test ROC-AUC 0.7123 (epoch 12 of best
/// validation ROC-AUC 0.7345); final test ROC-AUC 0.7012; test accuracy 75.12%" ("undefined
/// (one class)" for an AUC a split could not give), and for data without a validation split
/// "no validation split: test accuracy 80.90% at the final epoch 200 (no epoch is selected)".
/// A link-prediction run's ROC-AUC line is followed by "test AP 0.91, MRR 0.21, Hits@20 ...".
std::string describe_final_result(const FinalResult& r);

} // namespace tessera::runtime
