// A consumer of the installed Tessera: trains a GCN on a generated graph for a few epochs through
// the public API and prints what the build has.
#include <cstdio>
#include <tessera/tessera.hpp>

int main() {
  tessera::runtime::TrainJob job;
  job.dataset = "sbm:nodes=500,classes=3,avg-degree=6,p-in=0.9,features=8,noise=0.5";
  job.train.epochs = 5;
  const tessera::runtime::RunSummary run = tessera::runtime::run_train_job(job);
  std::printf("Tessera %s (CUDA %d, NCCL %d): loss after 5 epochs %.4f\n", TESSERA_VERSION,
              TESSERA_HAS_CUDA, TESSERA_HAS_NCCL, run.result.history.back().train_loss);
  return run.result.history.size() == 5 ? 0 : 1;
}
