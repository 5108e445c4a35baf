// The metrics of a run report, written alike for GNN and MLP runs.
#pragma once

#include "tessera/core/report.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/gnn/trainer.hpp"

#include <string>
#include <utility>
#include <vector>

namespace tessera::runtime {

/// The metrics that end a run.
struct FinalMetrics {
  const gnn::SplitMetrics& best_val;
  const gnn::SplitMetrics& test_at_best_val;
  const gnn::SplitMetrics& final_test;
  int best_epoch = 0;
  double final_loss = 0.0;
  bool has_validation = true; ///< false: best_epoch is the last epoch evaluated
  int epochs_trained = 0;     ///< the last epoch trained (a resumed run counts those before it)
  bool has_test = true;       ///< false: the test split is empty
};

/// Sets metrics.epochs_trained, metrics.{test_accuracy, best_val_accuracy, best_epoch,
/// final_test_accuracy, final_loss}, metrics.selected_by ("best validation", or "final epoch (no
/// validation split)") and, where they were measured, metrics.{test, best_val,
/// final_test}_roc_auc. What was not measured is left out rather than written as 0: after no
/// epoch, only epochs_trained (and selected_by "none: no epochs trained"); without test rows, no
/// test metric.
void report_final_metrics(RunReport& report, const FinalMetrics& m);

using ReportFields = std::vector<std::pair<std::string, double>>;

/// Appends an epoch row's evaluation fields (train/val/test accuracy, val loss; val and test
/// ROC-AUC where measured) and its offload fields (moved bytes, stall, hit rate) to `fields`.
void add_epoch_fields(ReportFields& fields, const gnn::SplitMetrics& train,
                      const gnn::SplitMetrics& val, const gnn::SplitMetrics& test,
                      const OffloadStats& offload);

} // namespace tessera::runtime
