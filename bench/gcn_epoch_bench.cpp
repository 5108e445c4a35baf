// Full-batch GCN epoch (forward + backward + Adam) on a generated RMAT graph, against its floor:
// the larger of (bytes its kernels move / STREAM triad bandwidth) and (GEMM flops / sgemm rate),
// all measured in this run. Also peak memory against the bytes the run must hold.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <omp.h>

#include <tessera/tessera.hpp>

#include "machine_rates.hpp"

namespace {

using namespace tessera;

/// Bytes and flops of one training epoch of a GCN, op by op as the modules run them.
struct Traffic {
  double bytes = 0.0;
  double flops = 0.0;
};

Traffic epoch_traffic(const Sequential<float>& model, std::int64_t n, std::int64_t nnz,
                      std::int64_t features, std::int64_t classes) {
  constexpr double f = sizeof(float);
  const double rows = static_cast<double>(n);
  Traffic t;
  const auto spmm = [&](double width) {
    t.bytes += bench::spmm_bytes(n, nnz, static_cast<std::int64_t>(width));
  };
  const auto gemm = [&](double in, double out) {
    t.flops += 2.0 * rows * in * out;
    t.bytes += rows * (in + out) * f;
  };
  const auto stream = [&](double arrays, double width) { t.bytes += arrays * rows * width * f; };

  // Only modules after the first trainable one compute an input gradient.
  bool input_grad = false;
  double width = static_cast<double>(features);  // of the activation flowing into each module
  for (const auto& module : model.modules()) {
    const auto* conv = dynamic_cast<const GcnConv<float>*>(module.get());
    if (conv == nullptr) {
      // Dropout, ReLU or fused ReLU+dropout: read and write forward; backward reads the gradient
      // (and the output, but for plain dropout) and writes one.
      const bool plain_dropout = dynamic_cast<const Dropout<float>*>(module.get()) != nullptr;
      stream(2, width);
      if (input_grad) stream(plain_dropout ? 2 : 3, width);
      continue;
    }
    const double in = static_cast<double>(conv->weight().value.rows());
    const double out = static_cast<double>(conv->weight().value.cols());
    stream(2, out);  // bias
    stream(1, out);  // bias gradient
    if (conv->transforms_first()) {
      gemm(in, out);  // x·W
      spmm(out);      // Â·(xW)
      spmm(out);      // Âᵀ·dy
      gemm(in, out);  // dW = xᵀ·d(xW)
      if (input_grad) gemm(out, in);  // dx = d(xW)·Wᵀ
    } else {
      spmm(in);       // Â·x
      gemm(in, out);  // (Âx)·W
      gemm(in, out);  // dW = (Âx)ᵀ·dy
      if (input_grad) gemm(out, in), spmm(in);  // d(Âx) = dy·Wᵀ, dx = Âᵀ·d(Âx)
    }
    input_grad = true;
    width = out;
  }
  stream(2, static_cast<double>(classes));  // loss: logits read, gradient written
  return t;
}

double mib(double bytes) { return bytes / (1 << 20); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GCN epoch time against its memory/compute floor on a generated RMAT graph."};
  int scale = 20, epochs = 5, hidden = 128, features = 128, classes = 16;
  std::vector<int> threads{1, 2};
  app.add_option("--scale", scale, "RMAT scale (2^scale nodes, edge factor 16)")->capture_default_str();
  app.add_option("--epochs", epochs, "timed epochs (after one warm-up)")->capture_default_str();
  app.add_option("--hidden", hidden, "hidden width")->capture_default_str();
  app.add_option("--features", features, "input features")->capture_default_str();
  app.add_option("--threads", threads, "thread counts to run")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const BackendPtr cpu = make_cpu_backend();
    const std::string spec = fmt::format("rmat:scale={},edge-factor=16,features={},classes={}",
                                         scale, features, classes);
    datasets::Dataset data = datasets::load_dataset(cpu, spec, {});
    const Csr a_hat = graph::gcn_normalize(data.adjacency);
    data.adjacency = Csr();
    const std::int64_t n = a_hat.rows();
    fmt::print("graph {}: {} nodes, {} nonzeros in A+I, features {}, hidden {}, classes {}\n",
               spec, n, a_hat.nnz(), features, hidden, classes);

    gnn::GcnConfig config;
    config.layer_sizes = {features, hidden, classes};
    Sequential<float> model = gnn::build_gcn(cpu, a_hat, a_hat, config, 0);
    const gnn::NodeLabels labels{data.labels, data.train_idx, data.val_idx, data.test_idx};
    const Traffic traffic = epoch_traffic(model, n, a_hat.nnz(), features, classes);

    // Reference rates first: their buffers come and go before the model's are allocated, so
    // the peak memory below is the training run's.
    struct Rates {
      double triad_gbps, sgemm_gflops;
    };
    std::vector<Rates> rates;
    for (const int t : threads) {
      omp_set_num_threads(t);
      rates.push_back({bench::stream_triad_gbps(), bench::sgemm_gflops(n, hidden, features, 3)});
    }

    fmt::print("{:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>7}\n", "threads", "triad", "sgemm",
               "GB/epoch", "GFLOP", "floor ms", "epoch ms", "ratio");
    for (std::size_t i = 0; i < threads.size(); ++i) {
      omp_set_num_threads(threads[i]);
      gnn::TrainConfig train;
      train.epochs = epochs + 1;
      train.eval_every = 1 << 30;  // evaluation is not part of an epoch's cost
      const gnn::TrainResult result = gnn::train_node_classifier(
          cpu, model, Input<float>(data.features.dense->cview()), labels, train);
      const double floor_ms = 1e3 * std::max(traffic.bytes / (rates[i].triad_gbps * 1e9),
                                             traffic.flops / (rates[i].sgemm_gflops * 1e9));
      fmt::print("{:>7} {:>6.1f} GB/s {:>5.0f} GF/s {:>9.2f} {:>9.1f} {:>10.1f} {:>10.1f} {:>6.2f}x\n",
                 threads[i], rates[i].triad_gbps, rates[i].sgemm_gflops, traffic.bytes / 1e9,
                 traffic.flops / 1e9, floor_ms, result.median_step_ms,
                 result.median_step_ms / floor_ms);
    }

    const double graph = static_cast<double>(a_hat.bytes());
    const double feats = static_cast<double>(data.features.dense->bytes());
    const double buffers = static_cast<double>(model.bytes());
    const double must_hold = graph + feats + buffers;  // Adam's state is 2x the (tiny) weights
    const double peak = static_cast<double>(peak_rss_bytes());
    fmt::print("memory: graph {:.0f} MiB + features {:.0f} MiB + model buffers {:.0f} MiB = {:.0f} "
               "MiB; peak RSS {:.0f} MiB ({:.2f}x)\n",
               mib(graph), mib(feats), mib(buffers), mib(must_hold), mib(peak), peak / must_hold);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
