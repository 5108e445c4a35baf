// tessera-train --task link as a library call (issue 40): a generated graph's held-out edges
// learned, the report's ranking keys, the same run twice, and what link prediction refuses.
#include "tessera/tessera.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

runtime::TrainJob link_job() {
  runtime::TrainJob job;
  job.dataset = "sbm:nodes=1500,classes=6,avg-degree=10,p-in=0.9,features=16,noise=1";
  job.task = runtime::Task::Link;
  job.link.embedding_width = 8;
  job.link.hits_k = {10, 50};
  job.shape.hidden = 16;
  job.model.dropout = 0.0f;
  job.train.epochs = 40;
  job.train.eval_every = 5;
  job.train.metric = gnn::Metric::RocAuc;
  job.train.adam.weight_decay = 0.0f;
  return job;
}

TEST(LinkJob, LearnsAGeneratedGraphsHeldOutEdgesAndReportsTheRankingMetrics) {
  const runtime::RunSummary summary = runtime::run_train_job(link_job());
  const gnn::SplitMetrics& test = summary.result.test_at_best_val;

  ASSERT_TRUE(test.roc_auc.has_value());
  EXPECT_GT(*test.roc_auc, 0.8) << "edges mostly join nodes of a class: an encoder sees it";
  ASSERT_TRUE(test.link.has_value());
  EXPECT_GT(test.link->average_precision, 0.75);
  ASSERT_EQ(test.link->hits.size(), 2u);
  EXPECT_EQ(test.link->hits[0].first, 10);
  EXPECT_EQ(summary.classes, 8) << "the model's output is the embedding width";
  const std::string report = runtime::report_json(summary);
  for (const char* key : {"\"test_roc_auc\"", "\"test_ap\"", "\"test_mrr\"", "\"test_hits@10\"",
                          "\"test_hits@50\"", "\"best_val_roc_auc\""})
    EXPECT_THAT(report, HasSubstr(key));
}

TEST(LinkJob, TheSameSeedGivesTheSameRunAndAnotherSeedAnotherSplit) {
  runtime::TrainJob job = link_job();
  job.train.epochs = 5;
  const auto a = runtime::run_train_job(job);
  const auto b = runtime::run_train_job(job);
  job.train.seed = 1;
  const auto c = runtime::run_train_job(job);

  ASSERT_EQ(a.result.history.size(), b.result.history.size());
  for (std::size_t e = 0; e < a.result.history.size(); ++e)
    EXPECT_EQ(a.result.history[e].train_loss, b.result.history[e].train_loss);
  EXPECT_NE(a.result.history.back().train_loss, c.result.history.back().train_loss);
}

TEST(LinkJob, WhatLinkPredictionCannotDoIsRefusedBeforeLoading) {
  runtime::TrainJob predictions = link_job();
  predictions.outputs.predictions = "p.npy";
  runtime::TrainJob budget = link_job();
  budget.offload.device_bytes = 1 << 20;
  runtime::TrainJob split = link_job();
  split.link.val_fraction = 0.6;
  split.link.test_fraction = 0.5;
  runtime::TrainJob no_edges = link_job();
  no_edges.dataset = "sbm:nodes=100,avg-degree=0,features=4";

  EXPECT_THAT([&] { runtime::run_train_job(predictions); },
              ThrowsMessage<InvalidArgument>(HasSubstr("--embeddings writes the encoder's")));
  EXPECT_THAT([&] { runtime::run_train_job(budget); },
              ThrowsMessage<InvalidArgument>(HasSubstr("memory budget")));
  EXPECT_THAT([&] { runtime::run_train_job(split); },
              ThrowsMessage<InvalidArgument>(HasSubstr("leave edges to train on")));
  EXPECT_THAT([&] { runtime::run_train_job(no_edges); },
              ThrowsMessage<InvalidArgument>(HasSubstr("the graph has no edges")));
}

} // namespace
} // namespace tessera
