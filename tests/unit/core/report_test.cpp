// The run report: dotted keys nest, arrays append, files are written whole.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"

namespace tessera {
namespace {

TEST(RunReport, DottedKeysNestAndArraysAppend) {
  RunReport report;

  report.set("timing.epoch_ms_median", 1.5);
  report.set("config.dataset", "cora");
  report.append("epochs", {{"epoch", 1}, {"loss", 0.5}});
  report.append("epochs", {{"epoch", 2}, {"loss", 0.25}});

  const std::string text = report.dump();
  EXPECT_NE(text.find("\"timing\": {\n    \"epoch_ms_median\": 1.5"), std::string::npos) << text;
  EXPECT_NE(text.find("\"dataset\": \"cora\""), std::string::npos);
  EXPECT_NE(text.find("\"loss\": 0.25"), std::string::npos);
}

TEST(RunReport, NumbersReadBackByDottedKey) {
  RunReport report;
  report.set("timing.epoch_ms.max", 2.5);
  report.set("distributed.ranks", 4);
  report.set("dataset.name", "cora");

  EXPECT_DOUBLE_EQ(report.get_number("timing.epoch_ms.max"), 2.5);
  EXPECT_DOUBLE_EQ(report.get_number("distributed.ranks"), 4.0);
  EXPECT_TRUE(report.has("timing.epoch_ms"));
  EXPECT_FALSE(report.has("timing.wait_ms"));
  EXPECT_THROW(report.get_number("dataset.name"), InvalidArgument);
  EXPECT_THROW(report.get_number("no.such.key"), InvalidArgument);
}

TEST(RunReport, KeyThroughAValueIsRefusedNamingIt) {
  RunReport report;
  report.set("timing.epoch_ms", 3.0);

  EXPECT_THAT([&] { report.set("timing.epoch_ms.max", 4.0); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  ::testing::HasSubstr("'timing.epoch_ms' already holds a value")));
  EXPECT_EQ(report.get_number("timing.epoch_ms"), 3.0);
}

TEST(RunReport, WriteReplacesTheFileAndLeavesNoTemporary) {
  const auto path = std::filesystem::temp_directory_path() / "tessera_report_test.json";
  RunReport report;
  report.set("metrics.test_accuracy", 0.815);

  report.write(path.string());

  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_NE(content.str().find("0.815"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  std::filesystem::remove(path);
}

TEST(RunReport, WriteToMissingFolderThrowsIoError) {
  RunReport report;

  EXPECT_THROW(report.write("/nonexistent-folder/report.json"), IoError);
}

TEST(PeakRss, IsPositive) { EXPECT_GT(peak_rss_bytes(), 0); }

}  // namespace
}  // namespace tessera
