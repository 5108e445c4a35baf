// Full-batch GCN epoch (forward + backward + Adam) on a generated RMAT graph, against its floor:
// the larger of (bytes its kernels move / STREAM triad bandwidth) and (GEMM flops / sgemm rate),
// all measured in this run. Also peak memory against the bytes the run must hold.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <omp.h>

#include <tessera/tessera.hpp>

namespace {

using namespace tessera;

/// Bytes and flops of one training epoch of a GCN, op by op as the modules run them.
struct Traffic {
  double bytes = 0.0;
  double flops = 0.0;
};

/// The traffic of gnn::build_gcn's model for `spec`, module by module: Dropout, then per layer
/// GCNConv and (between layers) the fused ReLU+Dropout.
Traffic epoch_traffic(const gnn::ModelSpec& spec, std::int64_t n, std::int64_t nnz) {
  constexpr double f = sizeof(float);
  const double rows = static_cast<double>(n);
  Traffic t;
  const auto spmm = [&](double width) {
    t.bytes += spmm_model_bytes(n, nnz, static_cast<std::int64_t>(width));
  };
  const auto gemm = [&](double in, double out) {
    t.flops += 2.0 * rows * in * out;
    t.bytes += rows * (in + out) * f;
  };
  const auto stream = [&](double arrays, double width) { t.bytes += arrays * rows * width * f; };

  // The input dropout: read and write forward, no gradient (nothing trainable before it).
  stream(2, static_cast<double>(spec.layer_sizes.front()));
  for (int i = 0; i < spec.num_layers(); ++i) {
    const std::int64_t in = spec.layer_sizes[static_cast<std::size_t>(i)];
    const std::int64_t out = spec.layer_sizes[static_cast<std::size_t>(i) + 1];
    const bool input_grad = i > 0;  // the first convolution's input needs no gradient
    stream(2, static_cast<double>(out));  // bias
    stream(1, static_cast<double>(out));  // bias gradient
    const double x = static_cast<double>(in), y = static_cast<double>(out);
    if (transforms_first(spec.config.order, in, out)) {
      gemm(x, y);  // x·W
      spmm(y);     // Â·(xW)
      spmm(y);     // Âᵀ·dy
      gemm(x, y);  // dW = xᵀ·d(xW)
      if (input_grad) gemm(y, x);  // dx = d(xW)·Wᵀ
    } else {
      spmm(x);     // Â·x
      gemm(x, y);  // (Âx)·W
      gemm(x, y);  // dW = (Âx)ᵀ·dy
      if (input_grad) gemm(y, x), spmm(x);  // d(Âx) = dy·Wᵀ, dx = Âᵀ·d(Âx)
    }
    // The fused ReLU+Dropout between layers: read and write forward; backward reads the output
    // and the gradient and writes one.
    if (i + 1 < spec.num_layers()) stream(2 + 3, y);
  }
  stream(2, static_cast<double>(spec.layer_sizes.back()));  // loss: logits read, gradient written
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

    const gnn::ModelSpec model_spec{{features, hidden, classes}, {}, 0};
    Sequential<float> model = gnn::build_gcn(cpu, a_hat, a_hat, model_spec);
    const gnn::NodeLabels labels{data.labels, data.train_idx, data.val_idx, data.test_idx};
    const Traffic traffic = epoch_traffic(model_spec, n, a_hat.nnz());

    // Reference rates first: their buffers come and go before the model's are allocated, so
    // the peak memory below is the training run's.
    // Measured the STREAM way (best of several after a warm-up; see machine_rates.hpp): the
    // floor divides by the best, the spread says how quiet the machine was.
    // The read-only rate is printed beside the triad: most of an epoch's bytes are reads.
    struct Rates {
      MeasuredRate triad, read, sgemm;
    };
    std::vector<Rates> rates;
    for (const int t : threads) {
      omp_set_num_threads(t);
      rates.push_back({stream_triad(), stream_read(), sgemm_rate(n, hidden, features, 5)});
      fmt::print("{} thread{}: triad {}, read-only {}, sgemm {}\n", t, t == 1 ? "" : "s",
                 rates.back().triad.describe("GB/s"), rates.back().read.describe("GB/s"),
                 rates.back().sgemm.describe("GFLOP/s"));
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
      const double floor_ms = 1e3 * std::max(traffic.bytes / (rates[i].triad.best * 1e9),
                                             traffic.flops / (rates[i].sgemm.best * 1e9));
      fmt::print(
          "{:>7} {:>6.1f} GB/s {:>5.0f} GF/s {:>9.2f} {:>9.1f} {:>10.1f} {:>10.1f} {:>6.2f}x\n",
          threads[i], rates[i].triad.best, rates[i].sgemm.best, traffic.bytes / 1e9,
          traffic.flops / 1e9, floor_ms, result.median_step_ms, result.median_step_ms / floor_ms);
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
