// Progress: stages report to the sink their thread installed, and only to it.
#include "tessera/core/progress.hpp"

#include <gtest/gtest.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tessera {
namespace {

using Kind = ProgressEvent::Kind;

/// Events as "Kind stage done/total unit", to compare whole sequences.
struct Recorder {
  std::vector<std::string> events;
  ProgressSink sink() {
    return [this](const ProgressEvent& e) {
      static const char* const kNames[] = {"Begin", "Advance", "End", "Abandon"};
      events.push_back(std::string(kNames[static_cast<int>(e.kind)]) + " " + std::string(e.stage) +
                       " " + std::to_string(e.done) + "/" + std::to_string(e.total) + " " +
                       std::string(e.unit));
    };
  }
};

TEST(Progress, StageReportsBeginAdvanceAndEndToTheInstalledSink) {
  Recorder recorder;
  const ProgressScope scope(recorder.sink());

  {
    ProgressStage stage("writing", 3, "tiles");
    stage.advance(1);
    stage.advance(3);
  }

  EXPECT_EQ(recorder.events,
            (std::vector<std::string>{"Begin writing 0/3 tiles", "Advance writing 1/3 tiles",
                                      "Advance writing 3/3 tiles", "End writing 3/3 tiles"}));
}

TEST(Progress, StageWithoutASinkReportsNothing) {
  Recorder recorder;
  { const ProgressScope scope(recorder.sink()); }

  ProgressStage stage("loading");
  stage.advance(5);
  stage.finish();

  EXPECT_TRUE(recorder.events.empty());
}

TEST(Progress, InnerScopeTakesOverAndTheOuterComesBack) {
  Recorder outer;
  Recorder inner;
  const ProgressScope outer_scope(outer.sink());

  {
    const ProgressScope inner_scope(inner.sink());
    const ProgressStage stage("inner");
  }
  const ProgressStage stage("outer");

  EXPECT_EQ(inner.events, (std::vector<std::string>{"Begin inner 0/0 ", "End inner 0/0 "}));
  EXPECT_EQ(outer.events, (std::vector<std::string>{"Begin outer 0/0 "}));
}

TEST(Progress, FinishEndsTheStageOnce) {
  Recorder recorder;
  const ProgressScope scope(recorder.sink());

  {
    ProgressStage stage("cut");
    stage.finish();
    stage.advance(1);
  }

  EXPECT_EQ(recorder.events, (std::vector<std::string>{"Begin cut 0/0 ", "End cut 0/0 "}));
}

TEST(Progress, StageLeftByAnExceptionIsAbandoned) {
  Recorder recorder;
  const ProgressScope scope(recorder.sink());

  try {
    ProgressStage stage("reading", 10, "bytes");
    stage.advance(4);
    throw std::runtime_error("bad line");
  } catch (const std::runtime_error&) {
  }

  EXPECT_EQ(recorder.events.back(), "Abandon reading 4/10 bytes");
}

TEST(Progress, OtherThreadsReportNothing) {
  Recorder recorder;
  const ProgressScope scope(recorder.sink());

  std::thread worker([] { const ProgressStage stage("worker"); });
  worker.join();

  EXPECT_TRUE(recorder.events.empty());
}

} // namespace
} // namespace tessera
