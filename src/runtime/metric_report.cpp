// The metrics of a run report, written alike for GNN and MLP runs.
#include "metric_report.hpp"

namespace tessera::runtime {

void report_final_metrics(RunReport& report, const FinalMetrics& m) {
  report.set("metrics.epochs_trained", m.epochs_trained);
  if (m.epochs_trained == 0) {
    report.set("metrics.selected_by", std::string("none: no epochs trained"));
    return;
  }
  if (m.has_test) report.set("metrics.test_accuracy", m.test_at_best_val.accuracy);
  if (m.has_validation) report.set("metrics.best_val_accuracy", m.best_val.accuracy);
  report.set("metrics.best_epoch", m.best_epoch);
  report.set(
      "metrics.selected_by",
      std::string(m.has_validation ? "best validation" : "final epoch (no validation split)"));
  if (m.has_test) report.set("metrics.final_test_accuracy", m.final_test.accuracy);
  report.set("metrics.final_loss", m.final_loss);
  const auto set_auc = [&report](const char* key, const gnn::SplitMetrics& s) {
    if (s.roc_auc) report.set(key, *s.roc_auc);
  };
  if (m.has_test) set_auc("metrics.test_roc_auc", m.test_at_best_val);
  if (m.has_validation) set_auc("metrics.best_val_roc_auc", m.best_val);
  if (m.has_test) set_auc("metrics.final_test_roc_auc", m.final_test);
  // Link prediction: the ranking metrics of the selected epoch's test and validation pairs.
  const auto set_link = [&report](const std::string& prefix, const gnn::SplitMetrics& s) {
    if (!s.link) return;
    report.set(prefix + "_ap", s.link->average_precision);
    report.set(prefix + "_mrr", s.link->mrr);
    for (const auto& [k, hits] : s.link->hits)
      report.set(prefix + "_hits@" + std::to_string(k), hits);
  };
  if (m.has_test) set_link("metrics.test", m.test_at_best_val);
  if (m.has_validation) set_link("metrics.best_val", m.best_val);
}

void add_epoch_fields(ReportFields& fields, const gnn::SplitMetrics& train,
                      const gnn::SplitMetrics& val, const gnn::SplitMetrics& test,
                      const OffloadStats& offload) {
  fields.emplace_back("train_accuracy", train.accuracy);
  fields.emplace_back("val_accuracy", val.accuracy);
  fields.emplace_back("val_loss", val.loss);
  fields.emplace_back("test_accuracy", test.accuracy);
  fields.emplace_back("moved_bytes", static_cast<double>(offload.moved_bytes()));
  fields.emplace_back("stall_ms", offload.stall_seconds * 1e3);
  fields.emplace_back("hit_rate", offload.hit_rate());
  if (val.roc_auc) fields.emplace_back("val_roc_auc", *val.roc_auc);
  if (test.roc_auc) fields.emplace_back("test_roc_auc", *test.roc_auc);
}

} // namespace tessera::runtime
