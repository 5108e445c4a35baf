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

/// The fixed prediction file: 300 labels and scores (one decimal: 51 distinct values, many
/// ties), and the values scikit-learn gave for them, written in its header.
struct Predictions {
  std::vector<double> scores;
  std::vector<std::uint8_t> positive;
  double roc_auc = std::numeric_limits<double>::quiet_NaN();
  double average_precision = std::numeric_limits<double>::quiet_NaN();
};

Predictions read_predictions() {
  std::ifstream in(TESSERA_GNN_TEST_DIR "/roc_auc_predictions.txt");
  EXPECT_TRUE(in) << "fixture missing";
  Predictions p;
  std::string line;
  while (std::getline(in, line)) {
    for (const auto& [key, value] :
         {std::pair<std::string, double*>{"roc_auc_score(labels, scores) = ", &p.roc_auc},
          {"average_precision_score(labels, scores) = ", &p.average_precision}}) {
      if (const auto at = line.find(key); at != std::string::npos)
        *value = std::stod(line.substr(at + key.size()));
    }
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    int label = 0;
    double score = 0.0;
    EXPECT_TRUE(fields >> label >> score) << line;
    p.positive.push_back(static_cast<std::uint8_t>(label));
    p.scores.push_back(score);
  }
  return p;
}

TEST(RocAuc, MatchesScikitLearnOnAFixedPredictionFileWithTies) {
  const Predictions p = read_predictions();
  ASSERT_EQ(p.scores.size(), 300u);
  ASSERT_FALSE(std::isnan(p.roc_auc));

  const std::optional<double> auc = roc_auc(p.scores, p.positive);
  ASSERT_TRUE(auc.has_value());
  EXPECT_NEAR(*auc, p.roc_auc, 1e-12);
}

// Issue 40: the link-prediction metrics.
TEST(AveragePrecision, MatchesScikitLearnOnTheFixedFileAndByHand) {
  const Predictions p = read_predictions();
  ASSERT_FALSE(std::isnan(p.average_precision));
  const std::optional<double> ap = average_precision(p.scores, p.positive);
  ASSERT_TRUE(ap.has_value());
  EXPECT_NEAR(*ap, p.average_precision, 1e-12);

  // scikit-learn: 0.8333... and, with a tie of two positives and a negative at the top, 0.5333...
  const std::vector<double> a{0.1, 0.4, 0.35, 0.8}, b{0.5, 0.5, 0.2, 0.9, 0.5};
  const std::vector<std::uint8_t> ya{0, 0, 1, 1}, yb{1, 0, 1, 0, 1};
  EXPECT_NEAR(*average_precision(a, ya), 5.0 / 6.0, 1e-12);
  EXPECT_NEAR(*average_precision(b, yb), 8.0 / 15.0, 1e-12);
  EXPECT_FALSE(average_precision(a, std::vector<std::uint8_t>(4, 0)).has_value());
}

TEST(LinkRanking, HitsAtKCountsPositivesAboveTheKthNegativeAsOgbDoes) {
  const std::vector<double> positive{0.9, 0.5, 0.2}, negative{0.6, 0.3, 0.1};
  EXPECT_NEAR(hits_at_k(positive, negative, 1), 1.0 / 3.0, 1e-12); // above 0.6
  EXPECT_NEAR(hits_at_k(positive, negative, 2), 2.0 / 3.0, 1e-12); // above 0.3
  EXPECT_NEAR(hits_at_k(positive, negative, 3), 1.0, 1e-12);       // above 0.1
  EXPECT_EQ(hits_at_k(positive, negative, 4), 1.0) << "fewer negatives than K";
  EXPECT_EQ(hits_at_k(std::vector<double>{0.3}, negative, 2), 0.0) << "a tie is no hit";
  EXPECT_THROW(hits_at_k(positive, negative, 0), InvalidArgument);
}

TEST(LinkRanking, MeanReciprocalRankRanksEachPositiveAmongTheNegativesTiesHalf) {
  const std::vector<double> negative{0.6, 0.3, 0.1};
  // Ranks 1, 2 and 3.
  EXPECT_NEAR(mean_reciprocal_rank(std::vector<double>{0.9, 0.5, 0.2}, negative),
              (1.0 + 0.5 + 1.0 / 3.0) / 3.0, 1e-12);
  // Tied with one negative: rank 1 + 1 + 0.5.
  EXPECT_NEAR(mean_reciprocal_rank(std::vector<double>{0.3}, negative), 1.0 / 2.5, 1e-12);
  EXPECT_EQ(mean_reciprocal_rank({}, negative), 0.0);
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
