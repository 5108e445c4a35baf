// The MPI tests' central check: two runs trained the same — per epoch, losses within 1e-5
// (relative) and equal accuracies.
#pragma once

#include <cmath>
#include <gtest/gtest.h>
#include <string>
#include <tessera/gnn/trainer.hpp>
#include <utility>

namespace tessera::testing {

/// `many` (a run on several ranks, say) trained what `one` did, epoch by epoch.
inline void expect_same_training(const gnn::TrainResult& one, const gnn::TrainResult& many) {
  ASSERT_EQ(one.history.size(), many.history.size());
  for (std::size_t e = 0; e < one.history.size(); ++e) {
    const gnn::EpochStats& a = one.history[e];
    const gnn::EpochStats& b = many.history[e];
    SCOPED_TRACE("epoch " + std::to_string(a.epoch));
    EXPECT_EQ(b.epoch, a.epoch);
    EXPECT_NEAR(b.train_loss, a.train_loss, 1e-5 * std::abs(a.train_loss));
    EXPECT_NEAR(b.val.loss, a.val.loss, 1e-5 * std::abs(a.val.loss));
    EXPECT_DOUBLE_EQ(b.train.accuracy, a.train.accuracy);
    EXPECT_DOUBLE_EQ(b.val.accuracy, a.val.accuracy);
    EXPECT_DOUBLE_EQ(b.test.accuracy, a.test.accuracy);
    // ROC-AUC (Metric::RocAuc) ranks scores that reassociation may move in the last bits.
    for (const auto& [x, y] :
         {std::pair{a.val.roc_auc, b.val.roc_auc}, std::pair{a.test.roc_auc, b.test.roc_auc}}) {
      ASSERT_EQ(y.has_value(), x.has_value());
      if (x) {
        EXPECT_NEAR(*y, *x, 1e-4);
      }
    }
  }
  EXPECT_EQ(many.best_epoch, one.best_epoch);
}

} // namespace tessera::testing
