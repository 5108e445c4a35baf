// Kernel benchmarks: the STREAM triad (what the memory system can do), SpMM on an R-MAT graph
// measured against it, GAT's attention kernels against their byte floor, the SGEMM rate of the
// GCN layer's dense product, and encoding halo messages (bf16, int8).
//
//   tessera-bench-kernels [--benchmark_min_time=0.5]    TESSERA_BENCH_SCALE=16 for a quick run,
//   TESSERA_BENCH_DATASET=npz:FILE (or any dataset spec with 128 dense features) instead of RMAT

#include <benchmark/benchmark.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <omp.h>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <tessera/comm/halo_exchange.hpp>
#include <tessera/core/device.hpp>
#include <tessera/core/rng.hpp>
#include <tessera/core/tensor.hpp>
#include <tessera/core/timer.hpp>
#include <tessera/datasets/dataset.hpp>
#include <tessera/engine/machine_rates.hpp>
#include <tessera/graph/graph.hpp>
#include <tessera/ops/ops.hpp>
#include <tessera/runtime/job_start.hpp>
#include <vector>

namespace {

using tessera::Stopwatch;

constexpr std::int64_t kFeatures = 128; // width of the SpMM and GEMM operands

/// SpMM's goal as a fraction of the triad bandwidth at `threads` threads.
double spmm_target(int threads) {
  return threads == 1 ? 0.80 : 0.85;
}

/// R-MAT scale (log2 of the node count) from TESSERA_BENCH_SCALE, default 20 (1M nodes).
int bench_scale() {
  const char* env = std::getenv("TESSERA_BENCH_SCALE");
  if (env == nullptr || *env == '\0') return 20;
  const int scale = std::atoi(env);
  if (scale < 4 || scale > 26) {
    throw std::invalid_argument("TESSERA_BENCH_SCALE must be an integer in [4, 26], got '" +
                                std::string(env) + "'");
  }
  return scale;
}

const tessera::BackendPtr& backend() {
  static const tessera::BackendPtr cpu = tessera::make_cpu_backend();
  return cpu;
}

/// Measured in this process, by thread count: the triad feeds SpMM's ratio and the summary.
std::map<int, tessera::MeasuredRate> triad, reads;
std::map<int, double> spmm_gbps;

/// Runs `body` once per benchmark iteration with OpenMP at state.range(0) threads, timing it
/// with a wall clock (manual time: CPU time of the main thread would miss the other threads).
/// Returns the total seconds.
template <typename Body> double timed_loop(benchmark::State& state, Body&& body) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  double total = 0.0;
  for (auto _ : state) {
    const Stopwatch watch;
    body();
    const double seconds = watch.seconds();
    state.SetIterationTime(seconds);
    total += seconds;
  }
  return total;
}

// ---- STREAM triad ------------------------------------------------------------------------------

/// A bandwidth measured STREAM's way, as the GCN epoch benchmark measures it: arrays of at least
/// 4x the last-level cache, the best of 10 sweeps after a warm-up (one benchmark iteration holds
/// all of them). `measure` returns the rate, `arrays` is how many triad-length float arrays one
/// sweep counts; the rate goes into `into` for the summary.
template <typename Measure>
void stream_rate(benchmark::State& state, Measure measure, double arrays,
                 std::map<int, tessera::MeasuredRate>& into) {
  const int threads = static_cast<int>(state.range(0));
  omp_set_num_threads(threads);
  tessera::MeasuredRate rate;
  for (auto _ : state) {
    rate = measure();
    const double bytes =
        arrays * sizeof(float) * static_cast<double>(tessera::default_triad_elements());
    state.SetIterationTime(bytes / (rate.best * 1e9));
  }
  into[threads] = rate;
  state.counters["GB/s"] = rate.best;
  state.counters["median"] = rate.median;
  state.counters["worst"] = rate.worst;
}

/// The triad, counted like STREAM: two arrays read, one written (write-allocate not counted).
void BM_StreamTriad(benchmark::State& state) {
  stream_rate(
      state, [] { return tessera::stream_triad(); }, 3.0, triad);
}
BENCHMARK(BM_StreamTriad)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

/// Read-only bandwidth: the sum of one array of the triad's length. SpMM mostly reads, and pays
/// no write-allocate on them.
void BM_StreamRead(benchmark::State& state) {
  stream_rate(
      state, [] { return tessera::stream_read(); }, 1.0, reads);
}
BENCHMARK(BM_StreamRead)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- SpMM --------------------------------------------------------------------------------------

/// Â (GCN-normalized R-MAT adjacency) and its [n, 128] feature matrix, loaded once.
struct SpmmInput {
  tessera::Csr a;
  tessera::Dense x; // [n, 128]
  tessera::Dense y; // [n, 128]

  SpmmInput() {
    const char* named = std::getenv("TESSERA_BENCH_DATASET");
    const std::string spec = named != nullptr && *named != '\0'
                                 ? std::string(named)
                                 : "rmat:scale=" + std::to_string(bench_scale()) +
                                       ",edge-factor=16,features=" + std::to_string(kFeatures) +
                                       ",classes=16";
    std::fprintf(stderr, "loading %s ...\n", spec.c_str());
    auto dataset = tessera::datasets::load_dataset(backend(), spec, {});
    a = tessera::graph::gcn_normalize(dataset.adjacency);
    if (!dataset.features.dense || dataset.features.cols() != kFeatures) {
      throw std::invalid_argument(spec + ": the kernel benchmarks need dense features of width " +
                                  std::to_string(kFeatures));
    }
    x = std::move(dataset.features.dense.value());
    y = tessera::Dense::zeros(backend(), a.rows(), kFeatures);
    std::fprintf(stderr, "Â: %lld rows, %lld nonzeros\n", static_cast<long long>(a.rows()),
                 static_cast<long long>(a.nnz()));
  }

  /// Bytes one SpMM moves if nothing is reused (see spmm_model_bytes).
  double bytes() const { return tessera::spmm_model_bytes(a.rows(), a.nnz(), kFeatures); }
};

/// The benchmarks' Â and features, loaded on first use.
SpmmInput& spmm_input() {
  static SpmmInput input;
  return input;
}

void BM_Spmm(benchmark::State& state) {
  SpmmInput& input = spmm_input();

  const double seconds = timed_loop(state, [&] {
    tessera::ops::spmm(*backend(), input.a.view(), input.x.cview(), input.y.view());
    benchmark::ClobberMemory();
  });

  const int threads = static_cast<int>(state.range(0));
  const double gbps = input.bytes() * static_cast<double>(state.iterations()) / seconds / 1e9;
  spmm_gbps[threads] = gbps;
  state.counters["GB/s"] = gbps;
  state.counters["nnz"] = static_cast<double>(input.a.nnz());
  if (const auto t = triad.find(threads); t != triad.end()) {
    state.counters["triad_ratio"] = gbps / t->second.best;
  }
}
BENCHMARK(BM_Spmm)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

/// The same product with the features stored in bfloat16 (--activation-dtype bf16): their rows
/// are half the bytes. GB/s counts the bytes it moves; speedup is BM_Spmm's time over this one's.
void BM_SpmmBf16(benchmark::State& state) {
  SpmmInput& input = spmm_input();
  tessera::DenseT<tessera::Bf16> x(backend(), input.x.rows(), input.x.cols());
  tessera::ops::round_to_bf16(*backend(), input.x.cview(), x.view());

  const double seconds = timed_loop(state, [&] {
    tessera::ops::spmm_bf16(*backend(), input.a.view(), x.cview(), input.y.view());
    benchmark::ClobberMemory();
  });

  const int threads = static_cast<int>(state.range(0));
  const double bytes =
      tessera::spmm_model_bytes(input.a.rows(), input.a.nnz(), kFeatures, sizeof(tessera::Bf16));
  const double gbps = bytes * static_cast<double>(state.iterations()) / seconds / 1e9;
  state.counters["GB/s"] = gbps;
  if (const auto fp32 = spmm_gbps.find(threads); fp32 != spmm_gbps.end()) {
    state.counters["speedup"] = gbps / bytes / (fp32->second / input.bytes());
  }
}
BENCHMARK(BM_SpmmBf16)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- The output layer's kernels ----------------------------------------------------------------

/// The kernels of a GCN's last layer (128 -> 16, transform-first) on the same Â, each against its
/// own floor (bytes at the triad rate, flops at the sgemm rate, the slower): range(0) threads,
/// range(1) which kernel — 0: Â·T, T [n, 16] (the SpMM forward; backward's Âᵀ·dy is the same for a
/// symmetric Â); 1: H·W, [n, 128] x [128, 16]; 2: Hᵀ·dT, [128, n] x [n, 16] (dW);
/// 3: dT·Wᵀ, [n, 16] x [16, 128] (dx).
void BM_OutputLayer(benchmark::State& state) {
  constexpr std::int64_t kNarrow = 16;
  SpmmInput& input = spmm_input();
  const std::int64_t n = input.a.rows();
  static const tessera::Dense t = [&] {
    tessera::Dense m(backend(), n, kNarrow);
    m.fill(0.25f);
    return m;
  }();
  static tessera::Dense out = tessera::Dense::zeros(backend(), n, kNarrow);
  static tessera::Dense wide = tessera::Dense::zeros(backend(), n, kFeatures);
  static const tessera::Dense w = [] {
    tessera::Dense m(backend(), kFeatures, kNarrow);
    m.fill(0.01f);
    return m;
  }();
  static tessera::Dense dw = tessera::Dense::zeros(backend(), kFeatures, kNarrow);
  using tessera::Transpose;
  const auto& be = *backend();
  const int kernel = static_cast<int>(state.range(1));
  const double rows = static_cast<double>(n);
  double bytes = 0.0, flops = 2.0 * rows * kFeatures * kNarrow;
  const char* what = "";
  const double seconds = timed_loop(state, [&] {
    switch (kernel) {
    case 0:
      tessera::ops::spmm(be, input.a.view(), t.cview(), out.view());
      break;
    case 1:
      tessera::ops::gemm(be, Transpose::No, Transpose::No, 1.0f, input.x.cview(), w.cview(), 0.0f,
                         out.view());
      break;
    case 2:
      tessera::ops::gemm(be, Transpose::Yes, Transpose::No, 1.0f, input.x.cview(), t.cview(), 0.0f,
                         dw.view());
      break;
    default:
      tessera::ops::gemm(be, Transpose::No, Transpose::Yes, 1.0f, t.cview(), w.cview(), 0.0f,
                         wide.view());
    }
    benchmark::ClobberMemory();
  });
  if (kernel == 0) {
    what = "spmm A.T";
    bytes = tessera::spmm_model_bytes(n, input.a.nnz(), kNarrow);
    flops = 0.0;
  } else {
    what = kernel == 1 ? "gemm H.W" : kernel == 2 ? "gemm Ht.dT" : "gemm dT.Wt";
    bytes = rows * (kFeatures + kNarrow) * sizeof(float);
  }
  const int threads = static_cast<int>(state.range(0));
  const double per_call = seconds / static_cast<double>(state.iterations());
  state.SetLabel(what);
  state.counters["GB/s"] = bytes / per_call / 1e9;
  state.counters["GFLOP/s"] = flops / per_call / 1e9;
  if (const auto tr = triad.find(threads); tr != triad.end()) {
    // The floor with the sgemm rate of BM_Sgemm's shape is not known here: bytes only.
    state.counters["bytes_floor_ratio"] = per_call / (bytes / (tr->second.best * 1e9));
  }
}
BENCHMARK(BM_OutputLayer)
    ->ArgsProduct({{1, 2}, {0, 1, 2, 3}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- GAT's attention kernels -------------------------------------------------------------------

/// The attention kernels of a GAT layer with 8 heads of 16 (the features, 128 wide, as z) over Â's
/// pattern, each against its floor: the bytes it must move if nothing is reused (every gathered
/// row and per-edge weight counted once per edge, at its useful size) at the triad rate (their
/// flops, a few per byte, are not the limit). range(0) threads, range(1) the kernel — 0:
/// edge_softmax, 1: edge_dropout (p 0.6), 2: edge_spmm, 3: edge_softmax_backward, 4:
/// edge_spmm_transpose.
void BM_Attention(benchmark::State& state) {
  constexpr std::int64_t kHeads = 8;
  SpmmInput& input = spmm_input();
  const std::int64_t n = input.a.rows(), nnz = input.a.nnz();
  const auto& be = *backend();
  struct Buffers {
    tessera::Csr at;
    std::vector<tessera::Offset> edge_of;
    tessera::Dense dst, src, alpha, weights, d_edge, d_dst, d_src, d_x;
  };
  static Buffers b = [&] {
    Buffers m;
    m.at = tessera::graph::transpose(input.a, m.edge_of);
    m.dst = tessera::Dense(backend(), n, kHeads);
    m.src = tessera::Dense(backend(), n, kHeads);
    m.dst.fill(0.1f);
    m.src.fill(-0.05f);
    for (tessera::Dense* e : {&m.alpha, &m.weights, &m.d_edge})
      *e = tessera::Dense::zeros(backend(), nnz, kHeads);
    m.d_dst = tessera::Dense::zeros(backend(), n, kHeads);
    m.d_src = tessera::Dense::zeros(backend(), n, kHeads);
    m.d_x = tessera::Dense::zeros(backend(), n, kFeatures);
    tessera::ops::edge_softmax(*backend(), input.a.view(), m.dst.cview(), m.src.cview(), 0.2f,
                               m.alpha.view());
    return m;
  }();
  const tessera::RngKey key = tessera::RngKey::make(1, tessera::RngPurpose::AttentionDropout, 0, 1);
  const int kernel = static_cast<int>(state.range(1));
  const double seconds = timed_loop(state, [&] {
    switch (kernel) {
    case 0:
      tessera::ops::edge_softmax(be, input.a.view(), b.dst.cview(), b.src.cview(), 0.2f,
                                 b.alpha.view());
      break;
    case 1:
      tessera::ops::edge_dropout(be, input.a.view(), b.alpha.cview(), 0.6f, key, {},
                                 b.weights.view());
      break;
    case 2:
      tessera::ops::edge_spmm(be, input.a.view(), b.alpha.cview(), input.x.cview(), input.y.view());
      break;
    case 3:
      tessera::ops::edge_softmax_backward(be, input.a.view(), b.dst.cview(), b.src.cview(), 0.2f,
                                          b.alpha.cview(), b.alpha.cview(), input.x.cview(),
                                          input.y.cview(), b.d_dst.view(), b.d_edge.view());
      break;
    default:
      tessera::ops::edge_spmm_transpose(be, b.at.view(), b.edge_of.data(), b.alpha.cview(),
                                        input.y.cview(), b.d_edge.cview(), b.d_x.view(),
                                        b.d_src.view());
    }
    benchmark::ClobberMemory();
  });
  // Bytes by kernel: E edges, n rows, H heads, F features; 4-byte values, columns and 8-byte
  // row offsets and edge ids.
  const double e = static_cast<double>(nnz), rows = static_cast<double>(n);
  const double h = kHeads, f = kFeatures, v = sizeof(float);
  const double structure = 8 * rows + 4 * e; // row_ptr, col
  const double bytes[] = {
      structure + v * (rows * h + 2 * e * h),                                // dst, src, alpha
      structure + v * 2 * e * h,                                             // alpha, out
      structure + v * (e * h + e * f + rows * f),                            // alpha, x, out
      structure + v * (2 * rows * h + 3 * e * h + e * h + e * f + rows * f), // + d_edge
      structure + 8 * e + v * (2 * e * h + e * f + rows * f + rows * h)};    // edge_of, ...
  const char* names[] = {"edge_softmax", "edge_dropout", "edge_spmm", "edge_softmax_backward",
                         "edge_spmm_transpose"};
  const int threads = static_cast<int>(state.range(0));
  const double per_call = seconds / static_cast<double>(state.iterations());
  state.SetLabel(names[kernel]);
  state.counters["GB/s"] = bytes[kernel] / per_call / 1e9;
  if (const auto tr = triad.find(threads); tr != triad.end()) {
    state.counters["bytes_floor_ratio"] = per_call / (bytes[kernel] / (tr->second.best * 1e9));
  }
}
BENCHMARK(BM_Attention)
    ->ArgsProduct({{1, 2}, {0, 1, 2, 3, 4}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- SGEMM -------------------------------------------------------------------------------------

/// The GCN layer's dense products at the graph's node count, H: [n, 128], W: [128, 128]:
/// 0 = the transform H · W, 1 = the weight gradient Hᵀ · dY (dY: [n, 128]).
void BM_Sgemm(benchmark::State& state) {
  static const std::int64_t n = std::int64_t{1} << bench_scale();
  static const tessera::Dense h = [] {
    tessera::Dense m(backend(), n, kFeatures);
    m.fill(0.5f);
    return m;
  }();
  static const tessera::Dense w = [] {
    tessera::Dense m(backend(), kFeatures, kFeatures);
    m.fill(0.01f);
    return m;
  }();
  static tessera::Dense out = tessera::Dense::zeros(backend(), n, kFeatures);
  static tessera::Dense dw = tessera::Dense::zeros(backend(), kFeatures, kFeatures);
  const bool gradient = state.range(1) == 1;

  const double seconds = timed_loop(state, [&] {
    if (gradient) {
      tessera::ops::gemm(*backend(), tessera::Transpose::Yes, tessera::Transpose::No, 1.0f,
                         h.cview(), out.cview(), 0.0f, dw.view());
    } else {
      tessera::ops::gemm(*backend(), tessera::Transpose::No, tessera::Transpose::No, 1.0f,
                         h.cview(), w.cview(), 0.0f, out.view());
    }
    benchmark::ClobberMemory();
  });

  const double flops = 2.0 * static_cast<double>(n) * kFeatures * kFeatures;
  state.counters["GFLOP/s"] = flops * static_cast<double>(state.iterations()) / seconds / 1e9;
}
BENCHMARK(BM_Sgemm)->ArgsProduct({{1, 2}, {0, 1}})->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- Halo message encoding ---------------------------------------------------------------------

/// Encoding then decoding 64k rows of 128 normal values (a halo message's rows) in a compressed
/// precision (1: bf16, 2: int8 with stochastic rounding) on one thread: GB/s of fp32 rows, what
/// the scheduler's cost model weighs against a link's bandwidth.
void BM_HaloEncode(benchmark::State& state) {
  omp_set_num_threads(1);
  const auto precision = static_cast<tessera::comm::HaloPrecision>(state.range(0));
  constexpr std::int64_t kRows = 64 << 10;
  static const std::vector<float> rows = [] {
    std::vector<float> values(static_cast<std::size_t>(kRows * kFeatures));
    std::mt19937 random(3);
    std::normal_distribution<float> normal;
    for (float& v : values)
      v = normal(random);
    return values;
  }();
  std::vector<std::byte> code(
      static_cast<std::size_t>(kRows) *
      tessera::comm::encoded_row_bytes(precision, kFeatures, sizeof(float)));
  std::vector<float> decoded(rows.size());
  const tessera::RngKey key = tessera::RngKey::make(0, tessera::RngPurpose::HaloRounding, 0);
  const tessera::ConstDenseView<float> in(rows.data(), kRows, kFeatures);

  const double seconds = timed_loop(state, [&] {
    tessera::comm::encode_rows(precision, in, std::span<std::byte>(code), key, 0);
    tessera::comm::decode_rows(precision, std::span<const std::byte>(code),
                               tessera::DenseView<float>(decoded.data(), kRows, kFeatures));
    benchmark::ClobberMemory();
  });

  const double bytes = static_cast<double>(rows.size() * sizeof(float));
  state.SetLabel(tessera::comm::to_string(precision));
  state.counters["GB/s"] = bytes * static_cast<double>(state.iterations()) / seconds / 1e9;
}
BENCHMARK(BM_HaloEncode)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

/// Names the BLAS kernel set in the benchmark context, and warns when it is the slow generic one.
void describe_blas() {
  benchmark::AddCustomContext("openblas_core", tessera::blas_core_name());
  if (const std::string warning = tessera::blas_performance_warning(); !warning.empty()) {
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
  }
}

/// The triad's arrays against the cache, then one line per thread count with both bandwidths
/// and their ratio against the target.
void print_summary() {
  const double llc = static_cast<double>(tessera::last_level_cache_bytes());
  const double array = static_cast<double>(tessera::default_triad_elements()) * sizeof(float);
  std::printf("triad arrays: 3 x %.0f MiB (%.1fx the %.0f MiB last-level cache)\n",
              array / (1 << 20), llc > 0 ? array / llc : 0.0, llc / (1 << 20));
  for (const auto& [threads, spmm] : spmm_gbps) {
    const auto t = triad.find(threads);
    if (t == triad.end()) continue;
    const double ratio = spmm / t->second.best;
    std::printf("SpMM at %d thread%s: %.2f GB/s = %.2f x triad %s (target >= %.2f: %s)\n", threads,
                threads == 1 ? "" : "s", spmm, ratio, t->second.describe("GB/s").c_str(),
                spmm_target(threads), ratio >= spmm_target(threads) ? "met" : "missed");
    if (const auto r = reads.find(threads); r != reads.end()) {
      std::printf("  and %.2f x the read-only %s\n", spmm / r->second.best,
                  r->second.describe("GB/s").c_str());
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  tessera::runtime::reexec_with_fast_blas(argv); // measure the kernels the programs run
  try {
    bench_scale(); // reject a bad TESSERA_BENCH_SCALE before any work
    benchmark::Initialize(&argc, argv);
    describe_blas();
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    print_summary();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-bench-kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
