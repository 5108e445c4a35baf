// Full-batch GCN epoch (forward + backward + Adam) on a generated RMAT graph (or any dataset),
// against its floor, in all and module by module: its kernels one after another, each bound by
// its bytes (STREAM triad bandwidth) or, a GEMM, by the slower of its bytes and its flops (sgemm
// rate), all measured in this run. Also peak memory against the bytes the run must hold.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/core.h>
#include <memory>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <tessera/tessera.hpp>
#include <utility>
#include <vector>

namespace {

using namespace tessera;

/// Bytes and flops of one module's forward and backward (or of the loss) in one epoch: the bytes
/// of its memory-bound kernels (SpMM, elementwise passes) and each GEMM's bytes and flops.
struct Traffic {
  struct Gemm {
    double bytes = 0.0, flops = 0.0;
  };
  explicit Traffic(std::string name) : what(std::move(name)) {}

  std::string what;
  double stream_bytes = 0.0;
  std::vector<Gemm> gemms;

  double bytes() const {
    double total = stream_bytes;
    for (const Gemm& g : gemms)
      total += g.bytes;
    return total;
  }
  double flops() const {
    double total = 0.0;
    for (const Gemm& g : gemms)
      total += g.flops;
    return total;
  }
  /// The floor in milliseconds: the kernels run one after another, the memory-bound ones at the
  /// triad rate and each GEMM at the slower of its bytes (triad) and its flops (sgemm rate).
  double floor_ms(double triad_gbps, double gemm_gflops) const {
    double seconds = stream_bytes / (triad_gbps * 1e9);
    for (const Gemm& g : gemms)
      seconds += std::max(g.bytes / (triad_gbps * 1e9), g.flops / (gemm_gflops * 1e9));
    return 1e3 * seconds;
  }
  /// What no schedule beats even if every kernel overlapped every other: all bytes at the triad
  /// rate or all flops at the sgemm rate, whichever takes longer.
  double overlapped_ms(double triad_gbps, double gemm_gflops) const {
    return 1e3 * std::max(bytes() / (triad_gbps * 1e9), flops() / (gemm_gflops * 1e9));
  }
};

/// The traffic of gnn::build_gcn's model for `spec`, module by module as they run: the input
/// Dropout, then the GCNConvs (each but the last with its ReLU and dropout fused), then the loss.
/// Counted: every array a kernel reads or writes in memory, once. What the cache-block fusion of
/// an aggregate-first GCNConv with an activation keeps in cache costs nothing here: forward, the
/// bias, ReLU and dropout on the rows the GEMM just wrote; backward, the gradient before the
/// activation, the bias gradient and the products that read it.
std::vector<Traffic> epoch_traffic(const gnn::ModelSpec& spec, std::int64_t n, std::int64_t nnz) {
  constexpr double f = sizeof(float);
  const double rows = static_cast<double>(n);
  std::vector<Traffic> modules;
  Traffic* t = nullptr;
  const auto spmm = [&](double width) {
    t->stream_bytes += spmm_model_bytes(n, nnz, static_cast<std::int64_t>(width));
  };
  // A GEMM over the rows, [rows, in] x [in, out], reading and writing `arrays` of the widths.
  const auto gemm = [&](double in, double out, double bytes_per_row) {
    t->gemms.push_back({rows * bytes_per_row * f, 2.0 * rows * in * out});
  };
  const auto stream = [&](double arrays, double width) {
    t->stream_bytes += arrays * rows * width * f;
  };
  // A forward aggregation: in bf16, its input is rounded first (read, half as much written) and
  // the rows it gathers are half the bytes.
  const auto aggregate = [&](double width) {
    if (spec.config.activation_dtype == ActivationDType::Fp32) return spmm(width);
    stream(1.5, width);
    t->stream_bytes += spmm_model_bytes(n, nnz, static_cast<std::int64_t>(width), sizeof(Bf16));
  };

  // The input dropout: read and write forward, no gradient (nothing trainable before it). With
  // bf16 an aggregate-first first layer applies it as it rounds its input (build_gcn).
  const bool fused_input_dropout =
      spec.config.activation_dtype == ActivationDType::Bf16 &&
      !transforms_first(spec.config.order, spec.layer_sizes[0], spec.layer_sizes[1]);
  if (!fused_input_dropout) {
    modules.emplace_back("Dropout (input)");
    t = &modules.back();
    stream(2, static_cast<double>(spec.layer_sizes.front()));
  }
  for (int i = 0; i < spec.num_layers(); ++i) {
    const std::int64_t in = spec.layer_sizes[static_cast<std::size_t>(i)];
    const std::int64_t out = spec.layer_sizes[static_cast<std::size_t>(i) + 1];
    const bool input_grad = i > 0; // the first convolution's input needs no gradient
    const bool activation = i + 1 < spec.num_layers(); // ReLU + dropout fused
    const bool first = transforms_first(spec.config.order, in, out);
    modules.emplace_back(fmt::format("GCNConv {} ({} -> {}, {}{}{})", i, in, out,
                                     first ? "transform-first" : "aggregate-first",
                                     i == 0 && fused_input_dropout ? ", input dropout" : "",
                                     activation ? ", + ReLU + dropout" : ""));
    t = &modules.back();
    const double x = static_cast<double>(in), y = static_cast<double>(out);
    if (first) {
      gemm(x, y, x + y);                 // x·W
      aggregate(y);                      // Â·(xW)
      stream(2, y);                      // bias (and activation) over the output: a pass of its own
      if (activation) stream(3, y);      // backward: output and its gradient read, one written
      stream(1, y);                      // bias gradient
      spmm(y);                           // Âᵀ·dy
      gemm(x, y, x + y);                 // dW = xᵀ·d(xW)
      if (input_grad) gemm(y, x, x + y); // dx = d(xW)·Wᵀ
    } else if (activation) {
      aggregate(x);      // Â·x
      gemm(x, y, x + y); // (Âx)·W, bias and activation in its cache blocks
      // Backward in cache blocks: output and its gradient read; the gradient before the
      // activation, its bias gradient and the products that read it stay in cache.
      stream(2, y);
      gemm(x, y, x);                          // dW = (Âx)ᵀ·dy, reading Âx
      if (input_grad) gemm(y, x, x), spmm(x); // d(Âx) = dy·Wᵀ written, dx = Âᵀ·d(Âx)
    } else {
      aggregate(x);                               // Â·x
      gemm(x, y, x + y);                          // (Âx)·W, bias in its cache blocks
      stream(1, y);                               // bias gradient
      gemm(x, y, x + y);                          // dW = (Âx)ᵀ·dy
      if (input_grad) gemm(y, x, x + y), spmm(x); // d(Âx) = dy·Wᵀ, dx = Âᵀ·d(Âx)
    }
  }
  modules.emplace_back("loss");
  t = &modules.back();
  stream(2, static_cast<double>(spec.layer_sizes.back())); // logits read, gradient written
  return modules;
}

/// The median of `values` (empty: 0).
double median_of(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t m = values.size() / 2;
  return values.size() % 2 == 1 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

double mib(double bytes) {
  return bytes / (1 << 20);
}

/// build_gcn's model with ReLU + dropout as modules of their own after each hidden GCNConv (as
/// before GcnActivation): the same function, to time the fusion against in the same run.
Sequential<float> build_separate_gcn(const BackendPtr& backend, const Csr& a_hat,
                                     const gnn::ModelSpec& spec) {
  Sequential<float> model;
  const float p = spec.config.dropout;
  model.add(std::make_unique<Dropout<float>>(backend, p, 0));
  for (int i = 0; i < spec.num_layers(); ++i) {
    const auto layer = static_cast<std::uint32_t>(i);
    auto conv = std::make_unique<GcnConv<float>>(
        backend, a_hat, a_hat, spec.layer_sizes[static_cast<std::size_t>(i)],
        spec.layer_sizes[static_cast<std::size_t>(i) + 1], spec.config.bias, spec.seed, layer,
        spec.order_of(i));
    for (Parameter<float>* param : conv->parameters())
      param->decay = spec.decays(i);
    conv->set_activation_dtype(spec.config.activation_dtype);
    model.add(std::move(conv));
    if (i + 1 < spec.num_layers())
      model.add(std::make_unique<ReluDropout<float>>(backend, p, layer + 1));
  }
  return model;
}

} // namespace

int main(int argc, char** argv) {
  tessera::runtime::reexec_with_fast_blas(argv); // measure the kernels the programs run
  CLI::App app{"GCN epoch time against its memory/compute floor, in all and module by module, on "
               "a generated RMAT graph or any dataset."};
  int scale = 20, epochs = 5, hidden = 128, features = 128, classes = 16;
  std::vector<int> threads{1, 2};
  app.add_option("--scale", scale, "RMAT scale (2^scale nodes, edge factor 16)")
      ->capture_default_str();
  app.add_option("--epochs", epochs, "timed epochs (after one warm-up)")->capture_default_str();
  app.add_option("--hidden", hidden, "hidden width")->capture_default_str();
  app.add_option("--features", features, "input features")->capture_default_str();
  app.add_option("--threads", threads, "thread counts to run")->capture_default_str();
  std::string dataset;
  app.add_option("--dataset", dataset,
                 "train on this dataset (any --dataset of tessera-train with dense features: "
                 "sbm:..., npz:FILE) instead of RMAT; its features and classes set the widths");
  std::string activation_dtype = "fp32";
  app.add_option("--activation-dtype", activation_dtype,
                 "what the GCN layers aggregate is stored in: fp32 or bf16")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  bool separate = false;
  app.add_flag("--separate", separate,
               "also time the model with ReLU + dropout as modules of their own (unfused), after "
               "the memory line");
  CLI11_PARSE(app, argc, argv);

  try {
    const BackendPtr cpu = make_cpu_backend();
    const std::string spec =
        !dataset.empty() ? dataset
                         : fmt::format("rmat:scale={},edge-factor=16,features={},classes={}", scale,
                                       features, classes);
    datasets::Dataset data = datasets::load_dataset(cpu, spec, {});
    if (!data.features.dense) throw InvalidArgument(spec + " has no dense features");
    features = static_cast<int>(data.features.cols());
    classes = data.num_classes;
    const Csr a_hat = graph::gcn_normalize(data.adjacency);
    data.adjacency = Csr();
    const std::int64_t n = a_hat.rows();
    fmt::print("graph {}: {} nodes, {} nonzeros in A+I, features {}, hidden {}, classes {}\n", spec,
               n, a_hat.nnz(), features, hidden, classes);

    gnn::ModelSpec model_spec{{features, hidden, classes}, {}, 0};
    model_spec.config.activation_dtype = parse_activation_dtype(activation_dtype);
    Sequential<float> model = gnn::build_gcn(cpu, a_hat, a_hat, model_spec);
    const gnn::NodeLabels labels{data.labels, data.train_idx, data.val_idx, data.test_idx};
    const std::vector<Traffic> modules = epoch_traffic(model_spec, n, a_hat.nnz());
    Traffic traffic("epoch");
    for (const Traffic& t : modules) {
      traffic.stream_bytes += t.stream_bytes;
      traffic.gemms.insert(traffic.gemms.end(), t.gemms.begin(), t.gemms.end());
    }
    if (modules.size() != model.modules().size() + 1) {
      throw std::logic_error("the traffic model does not follow build_gcn's modules:\n" +
                             model.summary());
    }
    fmt::print("model:\n{}", model.summary());

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

    const auto train = [&](Sequential<float>& m) {
      gnn::TrainConfig config;
      config.epochs = epochs + 1;
      config.eval_every = 1 << 30; // evaluation is not part of an epoch's cost
      return gnn::train_node_classifier(cpu, m, Input<float>(data.features.dense->cview()), labels,
                                        config);
    };
    std::vector<double> fused_ms;
    // The triad's arrays (3 x 4x the last-level cache) outweigh a small graph's model: the peak
    // below starts here.
    const bool peak_reset = reset_peak_rss();
    fmt::print("{:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>7}\n", "threads", "triad", "sgemm",
               "GB/epoch", "GFLOP", "floor ms", "epoch ms", "ratio");
    for (std::size_t i = 0; i < threads.size(); ++i) {
      omp_set_num_threads(threads[i]);
      const gnn::TrainResult result = train(model);
      fused_ms.push_back(result.median_step_ms);
      const double epoch_floor_ms = traffic.floor_ms(rates[i].triad.best, rates[i].sgemm.best);
      fmt::print(
          "{:>7} {:>6.1f} GB/s {:>5.0f} GF/s {:>9.2f} {:>9.1f} {:>10.1f} {:>10.1f} {:>6.2f}x\n",
          threads[i], rates[i].triad.best, rates[i].sgemm.best, traffic.bytes() / 1e9,
          traffic.flops() / 1e9, epoch_floor_ms, result.median_step_ms,
          result.median_step_ms / epoch_floor_ms);
      const double overlapped = traffic.overlapped_ms(rates[i].triad.best, rates[i].sgemm.best);
      fmt::print("        (were every kernel overlapped with every other: {:.1f} ms, {:.2f}x)\n",
                 overlapped, result.median_step_ms / overlapped);
      // Where the time goes: each module's median (forward + backward) against its own floor;
      // the loss and the optimizer are the rest of the epoch.
      double modules_ms = 0.0;
      for (std::size_t m = 0; m < modules.size(); ++m) {
        std::vector<double> times;
        for (std::size_t e = 1; e < result.history.size(); ++e) { // after the warm-up
          const std::vector<double>& ms = result.history[e].module_ms;
          if (m < ms.size()) times.push_back(ms[m]);
        }
        const bool is_module = m + 1 < modules.size();
        const double module_ms = is_module ? median_of(times) : result.median_step_ms - modules_ms;
        modules_ms += module_ms;
        const double module_floor = modules[m].floor_ms(rates[i].triad.best, rates[i].sgemm.best);
        fmt::print("        {:<56} {:>6.2f} GB {:>6.1f} GFLOP {:>8.1f} ms floor {:>8.1f} ms "
                   "{:>5.2f}x\n",
                   is_module ? modules[m].what
                             : fmt::format("loss {:.0f} ms, optimizer {:.0f} ms, the rest (mean)",
                                           1e3 * result.phases.loss / (epochs + 1),
                                           1e3 * result.phases.optimizer / (epochs + 1)),
                   modules[m].bytes() / 1e9, modules[m].flops() / 1e9, module_floor, module_ms,
                   module_ms / module_floor);
      }
    }

    const double graph = static_cast<double>(a_hat.bytes());
    const double feats = static_cast<double>(data.features.dense->bytes());
    const double buffers = static_cast<double>(model.bytes());
    const double must_hold = graph + feats + buffers; // Adam's state is 2x the (tiny) weights
    const double peak = static_cast<double>(peak_rss_bytes());
    fmt::print("memory: graph {:.0f} MiB + features {:.0f} MiB + model buffers {:.0f} MiB = {:.0f} "
               "MiB; peak RSS {}{:.0f} MiB ({:.2f}x)\n",
               mib(graph), mib(feats), mib(buffers), mib(must_hold),
               peak_reset ? "in training " : "(with the rate measurements) ", mib(peak),
               peak / must_hold);
    if (separate) {
      Sequential<float> unfused = build_separate_gcn(cpu, a_hat, model_spec);
      fmt::print("unfused model ({:.0f} MiB of buffers):\n{}",
                 mib(static_cast<double>(unfused.bytes())), unfused.summary());
      for (std::size_t i = 0; i < threads.size(); ++i) {
        omp_set_num_threads(threads[i]);
        const double ms = train(unfused).median_step_ms;
        fmt::print("{:>7} thread{}: unfused {:.1f} ms, fused {:.1f} ms: fused/unfused {:.2f}\n",
                   threads[i], threads[i] == 1 ? " " : "s", ms, fused_ms[i], fused_ms[i] / ms);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
