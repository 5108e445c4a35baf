// tessera-train --mode sampled as a library call (issue 41): a sampled GraphSAGE learns a
// generated graph about as full-graph training does, the same seed gives the same run, and what
// sampled training cannot do yet is refused before anything is loaded.
#include "tessera/tessera.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

runtime::TrainJob sage_job(bool sampled) {
  runtime::TrainJob job;
  job.dataset = "sbm:nodes=2000,classes=4,avg-degree=8,p-in=0.6,features=16,noise=2";
  job.model_builder = gnn::builder_for(gnn::ModelKind::Sage);
  job.model_name = gnn::display_name(gnn::ModelKind::Sage);
  job.shape.hidden = 16;
  job.train.epochs = 20;
  job.train.eval_every = 5;
  job.threads = 1;
  job.sampled.enabled = sampled;
  job.sampled.fanouts = {10, 5};
  job.sampled.batch_size = 100;
  return job;
}

TEST(SampledJob, LearnsAsFullGraphTrainingDoesAndRepeatsItself) {
  const runtime::RunSummary full = runtime::run_train_job(sage_job(false));
  const runtime::RunSummary a = runtime::run_train_job(sage_job(true));
  const runtime::RunSummary b = runtime::run_train_job(sage_job(true));
  EXPECT_GT(a.result.history.front().steps, 1);
  EXPECT_GT(a.result.final_test.accuracy, full.result.final_test.accuracy - 0.05)
      << "sampled " << a.result.final_test.accuracy << ", full " << full.result.final_test.accuracy;
  ASSERT_EQ(a.result.history.size(), b.result.history.size());
  for (std::size_t e = 0; e < a.result.history.size(); ++e)
    EXPECT_EQ(a.result.history[e].train_loss, b.result.history[e].train_loss);
}

TEST(SampledJob, GcnGinGatAndResidualBlocksTrainOnBlocks) {
  struct Case {
    gnn::ModelKind kind;
    bool residual;
  };
  for (const Case c : {Case{gnn::ModelKind::Gcn, false}, Case{gnn::ModelKind::Gin, false},
                       Case{gnn::ModelKind::Gat, false}, Case{gnn::ModelKind::Sage, true},
                       Case{gnn::ModelKind::Gat, true}}) {
    runtime::TrainJob job = sage_job(true);
    job.model_name = c.residual ? gnn::residual_name(c.kind) : gnn::display_name(c.kind);
    job.model_builder = gnn::builder_named(job.model_name).value();
    job.model.heads = 2;
    if (c.residual) { // two blocks of width 16 between an input and an output Linear
      job.shape.num_layers = 3;
      job.model.norm = gnn::NormKind::Batch;
    }
    SCOPED_TRACE(job.model_name);
    const runtime::RunSummary sampled = runtime::run_train_job(job);
    job.sampled.enabled = false;
    const runtime::RunSummary full = runtime::run_train_job(job);
    EXPECT_GT(sampled.result.history.front().steps, 1);
    EXPECT_GT(sampled.result.final_test.accuracy, full.result.final_test.accuracy - 0.08)
        << "sampled " << sampled.result.final_test.accuracy << ", full "
        << full.result.final_test.accuracy;
  }
}

TEST(SampledJob, WhatSampledTrainingCannotDoIsRefused) {
  runtime::TrainJob mlp = sage_job(true);
  mlp.model_builder = gnn::builder_for(gnn::ModelKind::Mlp);
  mlp.model_name = gnn::display_name(gnn::ModelKind::Mlp);
  runtime::TrainJob custom = sage_job(true);
  custom.model_name = "my model";
  runtime::TrainJob fanouts = sage_job(true);
  fanouts.sampled.fanouts = {10, 5, 5};
  runtime::TrainJob budget = sage_job(true);
  budget.offload.device_bytes = 1 << 20;
  runtime::TrainJob batch = sage_job(true);
  batch.sampled.batch_size = 100000;
  runtime::TrainJob link = sage_job(true);
  link.task = runtime::Task::Link;
  EXPECT_THAT([&] { runtime::run_train_job(mlp); },
              ThrowsMessage<InvalidArgument>(HasSubstr("MLP has none")));
  EXPECT_THAT([&] { runtime::run_train_job(custom); },
              ThrowsMessage<InvalidArgument>(HasSubstr("trains the built-in models")));
  EXPECT_THAT([&] { runtime::run_train_job(fanouts); },
              ThrowsMessage<InvalidArgument>(HasSubstr("3 fanouts for a model of 2 graph layers")));
  EXPECT_THAT([&] { runtime::run_train_job(budget); },
              ThrowsMessage<InvalidArgument>(HasSubstr("memory budget")));
  EXPECT_THAT([&] { runtime::run_train_job(batch); },
              ThrowsMessage<InvalidArgument>(HasSubstr("larger than the training set")));
  EXPECT_THAT([&] { runtime::run_train_job(link); },
              ThrowsMessage<InvalidArgument>(HasSubstr("trains node classifiers")));
}

} // namespace
} // namespace tessera
