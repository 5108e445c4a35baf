// The options module's flag values: each text becomes the library's typed setting, and each bad
// text is refused naming the flag, the text and the form it takes.
#include "tessera/core/error.hpp"
#include "tessera/runtime/cli_options.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::runtime {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(FlagValues, ByteSizesTakeBinaryUnits) {
  EXPECT_EQ(parse_byte_size("4096", "--x"), 4096u);
  EXPECT_EQ(parse_byte_size("64MiB", "--x"), std::size_t{64} << 20);
  EXPECT_EQ(parse_byte_size("2G", "--x"), std::size_t{2} << 30);
  EXPECT_EQ(parse_byte_size("512KB", "--x"), std::size_t{512} << 10);
  for (const char* bad : {"2.5G", "lots", "", "-1", "1PB", "99999999999999999999"}) {
    EXPECT_THAT([&] { parse_byte_size(bad, "--device-memory"); },
                ThrowsMessage<InvalidArgument>(
                    AllOf(HasSubstr("--device-memory: '" + std::string(bad) + "'"),
                          HasSubstr("is not a byte size"))))
        << bad;
  }
  // 2^54 GiB is past 2^64 bytes: refused, not wrapped.
  EXPECT_THROW(parse_byte_size("18014398509481984G", "--x"), InvalidArgument);
}

TEST(FlagValues, LayerSizesArePositiveWidthsJoinedByDashes) {
  EXPECT_EQ(parse_layer_sizes("1433-16-7"), (std::vector<std::int64_t>{1433, 16, 7}));
  EXPECT_EQ(parse_layer_sizes("2147483647-1"), (std::vector<std::int64_t>{2147483647, 1}));
  for (const char* bad : {"", "16", "16-", "a-7", "16--7", "0-7", "-3-7"}) {
    EXPECT_THAT([&] { parse_layer_sizes(bad); },
                ThrowsMessage<InvalidArgument>(HasSubstr("--layers '" + std::string(bad) + "'")))
        << bad;
  }
  // Issue 37: --layers 4611686018427387904-16-3 segfaulted in weight initialisation.
  EXPECT_THAT([] { parse_layer_sizes("4611686018427387904-16-3"); },
              ThrowsMessage<InvalidArgument>(
                  AllOf(HasSubstr("width 4611686018427387904"), HasSubstr("2^31 - 1"))));
}

TEST(FlagValues, DeviceChoices) {
  EXPECT_EQ(parse_device_choice("cpu"), DeviceChoice::Cpu);
  EXPECT_EQ(parse_device_choice("cuda"), DeviceChoice::Cuda);
  EXPECT_EQ(parse_device_choice("auto"), DeviceChoice::Auto);
  EXPECT_THAT(
      [] { parse_device_choice("gpu"); },
      ThrowsMessage<InvalidArgument>(HasSubstr("--device 'gpu': expects cpu, cuda or auto")));
}

TEST(FlagValues, SimulatedLinkTakesBandwidthAndLatency) {
  const comm::LinkModel plain = parse_link_model("10");
  const comm::LinkModel slow = parse_link_model("0.5:25");

  EXPECT_EQ(plain.gigabits_per_second, 10.0);
  EXPECT_EQ(plain.latency_us, 0.0);
  EXPECT_EQ(slow.gigabits_per_second, 0.5);
  EXPECT_EQ(slow.latency_us, 25.0);
  EXPECT_EQ(comm::to_string(slow), "0.5 Gb/s, 25 µs latency");
  for (const std::string text : {"", "fast", "10:", "10:x", "0", "-1:5", "10:-5", "10Gb", "inf"}) {
    EXPECT_THAT([&] { parse_link_model(text); },
                ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("--simulate-link '" + text + "'"),
                                                     HasSubstr("GBPS[:LATENCY_US]"))))
        << text;
  }
}

TEST(FlagValues, PartWeightsArePositiveSharesNamingTheFlag) {
  EXPECT_EQ(parse_part_weights("2,1,1.5,0.25", "--part-weights"),
            (std::vector<double>{2, 1, 1.5, 0.25}));
  EXPECT_EQ(parse_part_weights("3", "--part-weights"), (std::vector<double>{3}));
  for (const std::string bad : {"", "2,,1", "2,1,", "a,b", "1;2", "2,0", "1,-1", "1,nan", "1 ,2"}) {
    EXPECT_THAT([&] { parse_part_weights(bad, "--part-weights"); },
                ThrowsMessage<InvalidArgument>(HasSubstr("--part-weights '" + bad + "'")))
        << bad;
  }
  EXPECT_THAT([] { parse_part_weights("1,0", "--rank-speeds"); },
              ThrowsMessage<InvalidArgument>(HasSubstr("--rank-speeds '1,0': item 2 (0)")));
  EXPECT_THAT([] { parse_part_weights("1e308,1e308", "--part-weights"); },
              ThrowsMessage<InvalidArgument>(HasSubstr("sum beyond the range of a double")));
  EXPECT_THAT([] { parse_part_weights("1e-300,1", "--rank-speeds"); },
              ThrowsMessage<InvalidArgument>(HasSubstr("below 10^-6 of the largest")));
}

TEST(FlagValues, SimulationsNameTheirFlags) {
  EXPECT_EQ(parse_rank_speed("1:0.25"), (std::pair<int, double>{1, 0.25}));
  EXPECT_EQ(parse_failure("0:3"), (std::pair<int, int>{0, 3}));
  EXPECT_THAT([] { parse_rank_speed("1:x"); },
              ThrowsMessage<InvalidArgument>(HasSubstr("--simulate-rank-speed '1:x'")));
  EXPECT_THAT([] { parse_failure("0:1.5"); },
              ThrowsMessage<InvalidArgument>(HasSubstr("--inject-failure expects RANK:EPOCH")));
}

TEST(FlagValues, ScheduleAndTheInexactExchangesItMayPick) {
  EXPECT_EQ(parse_schedule("auto"), Schedule::Auto);
  EXPECT_EQ(parse_schedule("fixed"), Schedule::Fixed);
  EXPECT_THAT([] { parse_schedule("fast"); }, ThrowsMessage<InvalidArgument>(HasSubstr(
                                                  "--schedule 'fast': expects fixed or auto")));
  std::vector<comm::HaloMode> modes;
  std::vector<comm::HaloPrecision> precisions;
  parse_allowed_inexact("stale,int8", modes, precisions);
  EXPECT_EQ(modes, (std::vector<comm::HaloMode>{comm::HaloMode::Stale}));
  EXPECT_EQ(precisions, (std::vector<comm::HaloPrecision>{comm::HaloPrecision::Int8}));
  EXPECT_THAT([&] { parse_allowed_inexact("stale,fp16", modes, precisions); },
              ThrowsMessage<InvalidArgument>(HasSubstr("unknown 'fp16'")));
}

TEST(FlagValues, LibraryChecksAreLedByTheFlagsThatSetThem) {
  EXPECT_THAT(
      [] {
        check_flags("--rank-speeds",
                    [] { partition::check_rank_speeds(partition::Balance::Given, {}, 2); });
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("--rank-speeds: the balance 'given' needs")));
  EXPECT_NO_THROW(check_flags("--x", [] {}));
}

TEST(FlagValues, ErrorsAFlagAnswersNameTheFlag) {
  EXPECT_EQ(error_text(OutputExists("'out' already exists")),
            "'out' already exists; pass --force to replace it");
  EXPECT_EQ(error_text(PeerTimeout("rank 1 does not answer (limit 3 s: the peer timeout given)")),
            "rank 1 does not answer (limit 3 s: the peer timeout given); --peer-timeout sets it");
  EXPECT_EQ(error_text(IoError("cannot read 'x'")), "cannot read 'x'");
}

} // namespace
} // namespace tessera::runtime
