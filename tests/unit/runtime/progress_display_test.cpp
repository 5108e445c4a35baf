// The progress display: a terminal line redrawn and cleared, plain lines only for long stages.
#include "tessera/core/progress.hpp"
#include "tessera/runtime/progress_display.hpp"

#include <chrono>
#include <cstdio>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string>

namespace tessera::runtime {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

/// Everything written to `file` so far.
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file))
    text.push_back(static_cast<char>(c));
  return text;
}

/// Runs a stage of 4 MiB read in two steps through a display with `options`; returns its output.
std::string show_a_stage(ProgressDisplayOptions options) {
  std::FILE* file = std::tmpfile();
  {
    ProgressDisplay display(file, options);
    const ProgressScope scope(display.sink());
    ProgressStage stage("reading edge.csv.gz", 4 << 20, "bytes");
    stage.advance(1 << 20);
    stage.advance(4 << 20);
  }
  std::string text = contents(file);
  std::fclose(file);
  return text;
}

TEST(ProgressDisplay, PlainOutputSaysNothingOfAShortStage) {
  ProgressDisplayOptions options;
  options.first_line = hours(1);

  EXPECT_EQ(show_a_stage(options), "");
}

TEST(ProgressDisplay, PlainOutputGivesALongStageLinesAndAnEnd) {
  ProgressDisplayOptions options;
  options.first_line = milliseconds(0);
  options.every = hours(1);

  const std::string text = show_a_stage(options);

  EXPECT_THAT(text, StartsWith("reading edge.csv.gz: 0% of 4.0 MiB, 0.0 s\n"));
  EXPECT_THAT(text, EndsWith("reading edge.csv.gz: done in 0.0 s\n"));
  EXPECT_EQ(text.find('\r'), std::string::npos);
}

TEST(ProgressDisplay, TerminalRedrawsOneLineAndClearsItAtTheEnd) {
  ProgressDisplayOptions options;
  options.terminal = true;
  options.refresh = milliseconds(0);

  const std::string text = show_a_stage(options);

  EXPECT_THAT(text, HasSubstr("\rreading edge.csv.gz: 25% of 4.0 MiB"));
  EXPECT_THAT(text, HasSubstr("\rreading edge.csv.gz: 100% of 4.0 MiB"));
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_THAT(text, EndsWith("  \r"));
}

TEST(ProgressDisplay, TerminalShowsTheOuterStageAgainWhenTheInnerEnds) {
  std::FILE* file = std::tmpfile();
  ProgressDisplayOptions options;
  options.terminal = true;
  options.refresh = milliseconds(0);

  {
    ProgressDisplay display(file, options);
    const ProgressScope scope(display.sink());
    const ProgressStage outer("loading cora");
    { const ProgressStage inner("reading cora.npz", 10, "bytes"); }
    ProgressStage after("writing", 2, "tiles");
    after.advance(1);
  }

  const std::string text = contents(file);
  std::fclose(file);
  EXPECT_THAT(text, HasSubstr("\rreading cora.npz: 0% of 0.0 MiB"));
  EXPECT_THAT(text, HasSubstr("\rloading cora: running"));
  EXPECT_THAT(text, HasSubstr("\rwriting: 1/2 tiles"));
}

TEST(ProgressDisplay, DescribesAmountsByUnit) {
  EXPECT_EQ(describe_progress(3 << 20, 6 << 20, "bytes", 1.3), "50% of 6.0 MiB, 1.3 s");
  EXPECT_EQ(describe_progress(3, 8, "tiles", 2.0), "3/8 tiles, 2.0 s");
  EXPECT_EQ(describe_progress(1200, 0, "rows", 0.5), "1200 rows, 0.5 s");
  EXPECT_EQ(describe_progress(0, 0, "", 61.0), "running, 61.0 s");
}

} // namespace
} // namespace tessera::runtime
