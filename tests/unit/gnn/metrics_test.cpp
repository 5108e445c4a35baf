// ROC-AUC against scikit-learn on a fixed prediction file, by hand on small cases, and the metric
// names.
#include "tessera/core/error.hpp"
#include "tessera/gnn/metrics.hpp"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::gnn {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(RocAuc, MatchesScikitLearnOnAFixedPredictionFileWithTies) {
  // 300 predictions, scores with one decimal (51 distinct values: many ties), and the value
  // scikit-learn's roc_auc_score gave for them, written in the file's header.
  std::ifstream in(TESSERA_GNN_TEST_DIR "/roc_auc_predictions.txt");
  ASSERT_TRUE(in) << "fixture missing";
  std::string line;
  double expected = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> scores;
  std::vector<std::uint8_t> positive;
  while (std::getline(in, line)) {
    const std::string key = "roc_auc_score(labels, scores) = ";
    if (const auto at = line.find(key); at != std::string::npos) {
      expected = std::stod(line.substr(at + key.size()));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    int label = 0;
    double score = 0.0;
    ASSERT_TRUE(fields >> label >> score) << line;
    positive.push_back(static_cast<std::uint8_t>(label));
    scores.push_back(score);
  }
  ASSERT_EQ(scores.size(), 300u);
  ASSERT_FALSE(std::isnan(expected));

  const std::optional<double> auc = roc_auc(scores, positive);
  ASSERT_TRUE(auc.has_value());
  EXPECT_NEAR(*auc, expected, 1e-12);
}

TEST(RocAuc, SmallCasesByHand) {
  const std::vector<std::uint8_t> labels = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(*roc_auc(std::vector<double>{0.1, 0.2, 0.8, 0.9}, labels), 1.0);
  EXPECT_DOUBLE_EQ(*roc_auc(std::vector<double>{0.9, 0.8, 0.2, 0.1}, labels), 0.0);
  // Every score equal: every pair a tie.
  EXPECT_DOUBLE_EQ(*roc_auc(std::vector<double>{1, 1, 1, 1}, labels), 0.5);
  // Pairs (pos, neg): 0.35 > 0.1 yes, 0.35 > 0.4 no, 0.8 beats both: 3 of 4.
  EXPECT_DOUBLE_EQ(*roc_auc(std::vector<double>{0.1, 0.4, 0.35, 0.8}, labels), 0.75);
  // Order of the examples does not matter.
  EXPECT_DOUBLE_EQ(
      *roc_auc(std::vector<double>{0.8, 0.35, 0.4, 0.1}, std::vector<std::uint8_t>{1, 1, 0, 0}),
      0.75);
}

TEST(RocAuc, IsUndefinedWithoutBothClasses) {
  EXPECT_FALSE(roc_auc(std::vector<double>{0.1, 0.2}, std::vector<std::uint8_t>{1, 1}));
  EXPECT_FALSE(roc_auc(std::vector<double>{0.1, 0.2}, std::vector<std::uint8_t>{0, 0}));
  EXPECT_FALSE(roc_auc(std::vector<double>{}, std::vector<std::uint8_t>{}));
}

TEST(RocAuc, RefusesMismatchedLengthsAndNaN) {
  EXPECT_THAT(
      [] {
        roc_auc(std::vector<double>{0.1}, std::vector<std::uint8_t>{0, 1});
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("1 scores for 2 labels")));
  EXPECT_THAT(
      [] {
        roc_auc(std::vector<double>{0.1, std::nan("")}, std::vector<std::uint8_t>{0, 1});
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("score 1 is NaN")));
}

TEST(RocAuc, BinaryScoresOfChosenRowsGiveEachSplitItsOwnValue) {
  // Rows' logits [4, 2]: scores (logit 1 - logit 0) 1, -1, 2, 0.
  const std::vector<float> logits{0, 1, 1, 0, 0, 2, 3, 3};
  const ConstDenseView<float> view{logits.data(), 4, 2};
  const std::vector<std::int32_t> labels{1, 0, 0, 1};
  const std::vector<std::int32_t> first{0, 1}, last{2, 3};
  BinaryScores splits[3];

  splits[0].append(view, labels, first);
  splits[1].append(view, labels, last);
  splits[2].append(view, labels);
  const auto auc = roc_auc_over_ranks(splits, nullptr);

  EXPECT_EQ(splits[2].scores, (std::vector<double>{1, -1, 2, 0}));
  EXPECT_EQ(splits[2].positive, (std::vector<std::uint8_t>{1, 0, 0, 1}));
  EXPECT_EQ(auc[0], 1.0); // the positive row 0 above the negative row 1
  EXPECT_EQ(auc[1], 0.0); // the positive row 3 below the negative row 2
  EXPECT_EQ(auc[2], roc_auc(splits[2].scores, splits[2].positive));
}

TEST(Metric, ParsesItsNamesAndRefusesOthers) {
  EXPECT_EQ(parse_metric("accuracy"), Metric::Accuracy);
  EXPECT_EQ(parse_metric("roc-auc"), Metric::RocAuc);
  EXPECT_STREQ(to_string(Metric::RocAuc), "roc-auc");
  EXPECT_THAT([] { parse_metric("f1"); },
              ThrowsMessage<InvalidArgument>(HasSubstr("metrics: accuracy, roc-auc")));
}

} // namespace
} // namespace tessera::gnn
