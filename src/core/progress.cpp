// Progress of long steps: a per-thread sink and the stages that report to it.
#include "tessera/core/progress.hpp"

#include <exception>
#include <utility>

namespace tessera {

namespace {

thread_local const ProgressSink* current_sink = nullptr;

} // namespace

ProgressScope::ProgressScope(ProgressSink sink) : sink_(std::move(sink)), previous_(current_sink) {
  current_sink = sink_ ? &sink_ : nullptr;
}

ProgressScope::~ProgressScope() {
  current_sink = previous_;
}

ProgressStage::ProgressStage(std::string stage, std::int64_t total, std::string unit)
    : sink_(current_sink), stage_(std::move(stage)), unit_(std::move(unit)), total_(total),
      exceptions_at_begin_(std::uncaught_exceptions()) {
  send(ProgressEvent::Kind::Begin);
}

ProgressStage::~ProgressStage() {
  if (sink_ == nullptr) return;
  // A sink that throws while the stack unwinds would terminate the program: its error is dropped.
  try {
    if (std::uncaught_exceptions() > exceptions_at_begin_) {
      send(ProgressEvent::Kind::Abandon);
    } else {
      send(ProgressEvent::Kind::End);
    }
  } catch (...) {
  }
}

void ProgressStage::advance(std::int64_t done) {
  if (sink_ == nullptr) return;
  done_ = done;
  send(ProgressEvent::Kind::Advance);
}

void ProgressStage::finish() {
  if (sink_ == nullptr) return;
  send(ProgressEvent::Kind::End);
  sink_ = nullptr;
}

void ProgressStage::send(ProgressEvent::Kind kind) const {
  if (sink_ == nullptr) return;
  (*sink_)(ProgressEvent{kind, stage_, unit_, done_, total_});
}

} // namespace tessera
