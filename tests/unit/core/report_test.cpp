// The report builder: dotted keys nest, arrays append, a key through a value is refused.
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

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

TEST(RunReport, SettingAKeyAgainReplacesItsValue) {
  RunReport report;
  report.set("distributed.ranks", 2);

  report.set("distributed.ranks", 4);

  EXPECT_NE(report.dump().find("\"ranks\": 4"), std::string::npos) << report.dump();
  EXPECT_EQ(report.dump().find("\"ranks\": 2"), std::string::npos);
}

TEST(RunReport, KeyThroughAValueIsRefusedNamingIt) {
  RunReport report;
  report.set("timing.epoch_ms", 3.0);

  EXPECT_THAT([&] { report.set("timing.epoch_ms.max", 4.0); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  ::testing::HasSubstr("'timing.epoch_ms' already holds a value")));
  EXPECT_NE(report.dump().find("\"epoch_ms\": 3.0"), std::string::npos) << report.dump();
}

TEST(RunReport, ValueThatIsNotUtf8IsWrittenNotThrown) {
  RunReport report;
  report.set("dataset", std::string("npz:/data/caf\xe9.npz"));

  const std::string text = report.dump();

  EXPECT_NE(text.find("caf\xef\xbf\xbd.npz"), std::string::npos) << text;
}

TEST(PeakRss, IsPositive) { EXPECT_GT(peak_rss_bytes(), 0); }

TEST(PeakRss, RestartsFromTheMemoryResidentNowWhenReset) {
  // 64 MiB mapped, touched and unmapped (mmap: no allocator keeps it, ASan's neither).
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  void* block = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 1, kBytes);
  const std::int64_t with_block = peak_rss_bytes();
  munmap(block, kBytes);
  if (!reset_peak_rss()) GTEST_SKIP() << "this kernel refuses /proc/self/clear_refs";

  EXPECT_LT(peak_rss_bytes(), with_block - static_cast<std::int64_t>(kBytes / 2));
  EXPECT_GT(peak_rss_bytes(), 0);
}

}  // namespace
}  // namespace tessera
