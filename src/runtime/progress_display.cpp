// Shows the progress of long steps: a redrawn terminal line, or plain lines for long stages.
#include "tessera/runtime/progress_display.hpp"

#include "tessera/comm/communicator.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace tessera::runtime {

namespace {

std::string amount(std::int64_t count, const std::string& unit) {
  if (unit == "bytes") {
    const double mib = static_cast<double>(count) / (1 << 20);
    return mib < 1024 ? fmt::format("{:.1f} MiB", mib) : fmt::format("{:.2f} GiB", mib / 1024);
  }
  return unit.empty() ? std::to_string(count) : fmt::format("{} {}", count, unit);
}

/// The terminal's width in columns, 80 when it does not say.
std::size_t terminal_columns(std::FILE* out) {
  winsize size{};
  if (ioctl(fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

} // namespace

StdoutProgress::StdoutProgress(bool show) {
  if (!show) return;
  display_.emplace(stdout, stdout_progress_options());
  scope_.emplace(display_->sink());
}

EpochLinePrinter::EpochLinePrinter(int epochs, int log_every)
    : epochs_(epochs), log_every_(log_every), terminal_(stdout_progress_options().terminal) {}

void EpochLinePrinter::operator()(int epoch, const std::string& line) {
  if (terminal_) {
    fmt::print("\r{}", line);
    if (epoch == epochs_) fmt::print("\n");
  } else if (epoch % log_every_ == 0 || epoch == epochs_ || epoch == 1) {
    fmt::print("{}\n", line);
  } else {
    return;
  }
  std::fflush(stdout);
}

std::string describe_progress(std::int64_t done, std::int64_t total, const std::string& unit,
                              double seconds) {
  std::string text;
  if (total > 0 && unit == "bytes") {
    const double share =
        100.0 * static_cast<double>(std::min(done, total)) / static_cast<double>(total);
    text = fmt::format("{:.0f}% of {}, ", share, amount(total, unit));
  } else if (total > 0) {
    text = fmt::format("{}/{}, ", done, amount(total, unit));
  } else if (done > 0) {
    text = amount(done, unit) + ", ";
  } else {
    text = "running, ";
  }
  return text + fmt::format("{:.1f} s", seconds);
}

ProgressDisplayOptions stdout_progress_options() {
  ProgressDisplayOptions options;
  options.terminal = isatty(STDOUT_FILENO) != 0 && !comm::launched_by_mpi();
  return options;
}

ProgressDisplay::ProgressDisplay(std::FILE* out, ProgressDisplayOptions options)
    : out_(out), options_(options),
      ticker_([this](std::stop_token stop) { ticker(std::move(stop)); }) {}

// std::jthread requests the stop and joins; the ticker's wait takes the stop token, so it wakes.
ProgressDisplay::~ProgressDisplay() = default;

ProgressSink ProgressDisplay::sink() {
  return [this](const ProgressEvent& event) { on_event(event); };
}

void ProgressDisplay::on_event(const ProgressEvent& event) {
  const auto now = Clock::now();
  std::lock_guard lock(mutex_);
  switch (event.kind) {
  case ProgressEvent::Kind::Begin:
    running_.push_back(Running{std::string(event.stage), std::string(event.unit), event.done,
                               event.total, now, now + options_.first_line, false});
    break;
  case ProgressEvent::Kind::Advance:
    if (running_.empty() || running_.back().stage != event.stage) return;
    running_.back().done = event.done;
    break;
  case ProgressEvent::Kind::End:
  case ProgressEvent::Kind::Abandon: {
    // Stages end innermost first; one that ends out of order is dropped with those inside it.
    const auto it = std::find_if(running_.rbegin(), running_.rend(),
                                 [&](const Running& r) { return r.stage == event.stage; });
    if (it == running_.rend()) return;
    const Running ended = *it;
    running_.erase(std::next(it).base(), running_.end());
    if (options_.terminal) {
      if (running_.empty()) clear_line();
    } else if (ended.printed && event.kind == ProgressEvent::Kind::End) {
      const double seconds = std::chrono::duration<double>(now - ended.began).count();
      fmt::print(out_, "{}: done in {:.1f} s\n", ended.stage, seconds);
      std::fflush(out_);
    }
    break;
  }
  }
  show(now);
}

void ProgressDisplay::show(Clock::time_point now) {
  if (running_.empty()) return;
  if (options_.terminal) {
    if (now - last_draw_ >= options_.refresh) redraw(now);
    return;
  }
  Running& r = running_.back();
  if (now < r.next_line) return;
  const double seconds = std::chrono::duration<double>(now - r.began).count();
  fmt::print(out_, "{}: {}\n", r.stage, describe_progress(r.done, r.total, r.unit, seconds));
  std::fflush(out_);
  r.printed = true;
  r.next_line = now + options_.every;
}

void ProgressDisplay::redraw(Clock::time_point now) {
  const Running& r = running_.back();
  const double seconds = std::chrono::duration<double>(now - r.began).count();
  std::string line =
      fmt::format("{}: {}", r.stage, describe_progress(r.done, r.total, r.unit, seconds));
  // A line that wraps cannot be rewritten with "\r": keep it inside the terminal's width.
  line.resize(std::min(line.size(), terminal_columns(out_) - 1));
  const std::size_t width = line.size();
  line.resize(std::max(width, drawn_width_), ' ');
  fmt::print(out_, "\r{}", line);
  std::fflush(out_);
  drawn_width_ = width;
  last_draw_ = now;
}

void ProgressDisplay::clear_line() {
  if (drawn_width_ == 0) return;
  fmt::print(out_, "\r{}\r", std::string(drawn_width_, ' '));
  std::fflush(out_);
  drawn_width_ = 0;
  last_draw_ = {};
}

void ProgressDisplay::ticker(std::stop_token stop) {
  const auto period = std::max(std::chrono::milliseconds(20),
                               std::min(options_.terminal ? options_.refresh : options_.first_line,
                                        std::chrono::milliseconds(200)));
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    wake_.wait_for(lock, stop, period, [] { return false; });
    if (!stop.stop_requested()) show(Clock::now());
  }
}

std::string describe_split_metric(const gnn::SplitMetrics& m) {
  return m.roc_auc ? fmt::format("AUC {:.4f}", *m.roc_auc)
                   : fmt::format("{:6.2f}%", 100.0 * m.accuracy);
}

std::string describe_final_result(const FinalResult& r) {
  const auto auc = [](const std::optional<double>& value) {
    return value ? fmt::format("{:.4f}", *value) : std::string("undefined (one class)");
  };
  const bool roc_auc = r.metric == gnn::Metric::RocAuc;
  if (!r.has_validation) {
    const std::string test =
        roc_auc ? fmt::format("test ROC-AUC {}; test accuracy {:.2f}%", auc(r.final_test.roc_auc),
                              100.0 * r.final_test.accuracy)
                : fmt::format("test accuracy {:.2f}%", 100.0 * r.final_test.accuracy);
    return fmt::format("no validation split: {} at the final epoch {} (no epoch is selected)", test,
                       r.best_epoch);
  }
  if (roc_auc) {
    std::string line =
        fmt::format("test ROC-AUC {} (epoch {} of best validation ROC-AUC {}); "
                    "final test ROC-AUC {}; test accuracy {:.2f}%",
                    auc(r.test_at_best_val.roc_auc), r.best_epoch, auc(r.best_val.roc_auc),
                    auc(r.final_test.roc_auc), 100.0 * r.test_at_best_val.accuracy);
    if (const auto& link = r.test_at_best_val.link) {
      line += fmt::format("\ntest AP {:.4f}, MRR {:.4f}", link->average_precision, link->mrr);
      for (const auto& [k, hits] : link->hits)
        line += fmt::format(", Hits@{} {:.4f}", k, hits);
    }
    return line;
  }
  return fmt::format("test accuracy {:.2f}% (epoch {} of best validation accuracy {:.2f}%); final "
                     "test accuracy {:.2f}%",
                     100.0 * r.test_at_best_val.accuracy, r.best_epoch, 100.0 * r.best_val.accuracy,
                     100.0 * r.final_test.accuracy);
}

} // namespace tessera::runtime
