// Partitions generated RMAT graphs into many parts in one process and predicts what an epoch of a
// 2-layer GCN would cost on a cluster of one device per part, from the cost model
// (gnn::predict_layer) at given device and link rates, next to CAGNET's broadcast-based 1D and
// 1.5D algorithms (Tripathy, Yelick, Buluç, SC'20) under the same rates.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <bit>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tessera/tessera.hpp>
#include <vector>

namespace {

using namespace tessera;

/// The model and the cluster an epoch is predicted for: one device per part, one network link
/// per device.
struct Setup {
  double memory_gbps = 1200;          ///< effective bytes/s of SpMM, packing and GEMM operands
  double gemm_tflops = 19.5;          ///< dense fp32 rate
  double link_gbits = 100;            ///< the device's network link, each direction
  double latency_us = 5;              ///< per message
  std::vector<std::int64_t> widths;   ///< the GCN's: input features, hidden, classes
  std::vector<int> replication{2, 4}; ///< CAGNET 1.5D's c

  gnn::RankRates rates() const {
    gnn::RankRates r;
    r.spmm_gbps = {{1, memory_gbps}};
    r.gemm_gflops = gemm_tflops * 1e3;
    r.copy_gbps = memory_gbps; // encode_gbps 0: fp32 rows leave from device memory as they are
    return r;
  }
  /// Seconds of `messages` messages carrying `bytes` through the device's link: the link is one,
  /// so messages to different peers queue on it.
  double wire_seconds(double messages, double bytes) const {
    return messages * latency_us * 1e-6 + bytes * 8 / (link_gbits * 1e9);
  }
};

/// The layers of the GCN as a job runs them on a part (train_job.cpp's schedule_layers): the
/// narrower-width order, layer 0's input rows (ghosts included) cached, so only later layers
/// exchange.
std::vector<gnn::LayerShape> gcn_layers(const Setup& c, const gnn::PartCounts& part) {
  std::vector<gnn::LayerShape> layers;
  for (std::size_t i = 0; i + 1 < c.widths.size(); ++i) {
    gnn::LayerShape s;
    s.in = c.widths[i];
    s.out = c.widths[i + 1];
    s.transform_first = transforms_first(GcnOrder::Auto, s.in, s.out);
    s.has_halo = s.input_gradient = i > 0;
    s.input_rows = i == 0 ? part.n_local : part.n_owned;
    layers.push_back(s);
  }
  return layers;
}

/// A part's predicted training step, its compute and the exchange time no compute hides.
struct Step {
  double compute_ms = 0, comm_ms = 0;
  double total_ms() const { return compute_ms + comm_ms; }
};

Step predict_step(const Setup& c, const gnn::PartCounts& part, const gnn::WireSeconds& wire) {
  Step step;
  for (const gnn::LayerShape& layer : gcn_layers(c, part)) {
    const gnn::LayerPrediction p =
        gnn::predict_layer(c.rates(), part, layer, comm::ExchangeOptions{}, wire);
    step.compute_ms += p.compute_ms;
    step.comm_ms += p.wait_ms;
  }
  return step;
}

/// The compute of a step on a part with no halo: CAGNET's blocks.
double compute_ms(const Setup& c, std::int64_t rows, std::int64_t nnz) {
  return predict_step(c, {rows, rows, rows, nnz, 0}, [](std::int64_t) { return 0.0; }).compute_ms;
}

/// Per part: the cost model's counts (Â = A + I: a row's nonzeros are its degree + 1) and its
/// halo peers.
struct Parts {
  std::vector<gnn::PartCounts> counts;
  std::vector<int> peers;
};

Parts count_parts(const Csr& a, const partition::Partition& cut, const partition::Quality& q) {
  const auto parts = static_cast<std::size_t>(cut.num_parts);
  Parts out{std::vector<gnn::PartCounts>(parts), std::vector<int>(parts)};
  std::vector<std::uint8_t> linked(parts * parts); // [p * P + q]: p reads a row of q
  for (std::int64_t v = 0; v < a.rows(); ++v) {
    const auto p = static_cast<std::size_t>(cut.owner[v]);
    bool interior = true;
    for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k) {
      const auto other = static_cast<std::size_t>(cut.owner[a.col()[k]]);
      if (other != p) {
        interior = false;
        linked[p * parts + other] = 1;
      }
    }
    out.counts[p].nnz += a.row_ptr()[v + 1] - a.row_ptr()[v] + 1;
    out.counts[p].n_interior += interior;
  }
  for (std::size_t p = 0; p < parts; ++p) {
    out.counts[p].n_owned = q.part_nodes[p];
    out.counts[p].n_local = q.part_nodes[p] + q.recv[p];
    out.counts[p].rows_sent = q.send[p];
    out.peers[p] = static_cast<int>(
        std::count(linked.begin() + p * parts, linked.begin() + (p + 1) * parts, 1));
  }
  return out;
}

/// The most nonzeros of Â in one of `blocks` equal ranges of rows (CAGNET's block rows).
std::int64_t max_block_nonzeros(const Csr& a, std::int64_t blocks) {
  std::int64_t most = 0;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = a.rows() * b / blocks, end = a.rows() * (b + 1) / blocks;
    most = std::max(most, a.row_ptr()[end] - a.row_ptr()[begin] + (end - begin));
  }
  return most;
}

/// CAGNET's epoch on P devices: its SpMMs broadcast their dense input (forward: the layer's
/// input, backward: its output gradient) and compute without overlap.
struct Cagnet {
  double mb = 0, ms = 0; ///< MB each process receives per epoch; predicted epoch (0: no grid)
};

/// 1D: per SpMM, every process receives every other block row of the (n x w) dense matrix
/// ((P - 1)/P · n · w words; P - 1 broadcasts of log2 P steps), then multiplies its block row of
/// Â (n/P rows).
Cagnet cagnet_1d(const Setup& c, const Csr& a, std::int64_t parts) {
  const auto n = static_cast<double>(a.rows()), p = static_cast<double>(parts);
  Cagnet out;
  for (std::size_t i = 0; i + 1 < c.widths.size(); ++i) {
    for (const std::int64_t w : {c.widths[i], c.widths[i + 1]}) {
      const double bytes = (p - 1) / p * n * static_cast<double>(w) * sizeof(float);
      out.mb += bytes / 1e6;
      out.ms += 1e3 * c.wire_seconds(
                          (p - 1) * std::bit_width(static_cast<std::uint64_t>(parts - 1)), bytes);
    }
  }
  out.ms += compute_ms(c, a.rows() / parts, max_block_nonzeros(a, parts));
  return out;
}

/// 1.5D with replication c (gcn_distr_15d.py): P/c block rows, each held by c processes; per
/// SpMM a process takes part in P/c² broadcasts of (n·c/P x w) blocks among the P/c processes
/// of its column (n·w/c words), multiplies its 1/c of its block row's nonzeros, and all-reduces
/// the partial (n·c/P x w) block among its row's c processes (ring: 2(c-1)/c of the block).
Cagnet cagnet_15d(const Setup& c, const Csr& a, std::int64_t parts, std::int64_t rep) {
  if (parts % (rep * rep) != 0) return {};
  const auto n = static_cast<double>(a.rows()), p = static_cast<double>(parts);
  const auto r = static_cast<double>(rep);
  const std::int64_t block_rows = a.rows() * rep / parts;
  Cagnet out;
  for (std::size_t i = 0; i + 1 < c.widths.size(); ++i) {
    for (const std::int64_t w : {c.widths[i], c.widths[i + 1]}) {
      const double row_bytes = static_cast<double>(w) * sizeof(float);
      const double bcast = n / r * row_bytes, reduce = 2 * (r - 1) / r * n * r / p * row_bytes;
      out.mb += (bcast + reduce) / 1e6;
      const double stages =
          p / (r * r) * std::bit_width(static_cast<std::uint64_t>(parts / rep - 1));
      out.ms += 1e3 * (c.wire_seconds(stages, bcast) + c.wire_seconds(2 * (r - 1), reduce));
    }
  }
  out.ms += compute_ms(c, block_rows, max_block_nonzeros(a, parts / rep) / rep);
  return out;
}

/// One (scale, P, method): the partition, its quality, and the epochs predicted from it.
struct Row {
  int scale = 0, parts = 0;
  std::int64_t n = 0, nnz = 0;
  std::string method;
  double partition_s = 0, peak_gib = 0;
  partition::Quality quality;
  std::int64_t max_part_nnz = 0; ///< of Â
  int max_peers = 0;             ///< most parts one part exchanges with
  double mb = 0;                 ///< most MB a part receives per epoch
  Step epoch;                    ///< the slowest part's
  Cagnet one_d;
  std::vector<Cagnet> one_half_d; ///< per replication factor
  double best_cagnet_ms() const {
    double best = one_d.ms;
    for (const Cagnet& x : one_half_d)
      if (x.ms > 0) best = std::min(best, x.ms);
    return best;
  }
};

Row run(const Setup& c, const Csr& a, int scale, int parts, const std::string& method) {
  Row row;
  row.scale = scale;
  row.parts = parts;
  row.n = a.rows();
  row.nnz = a.nnz();
  row.method = method;
  partition::Options options;
  options.num_parts = parts;
  // hypergraph-ranks: the hypergraph cut with the settings it has over ranks (the default of a
  // distributed cut), here in one process.
  const bool over_ranks = method == "hypergraph-ranks";
  options.method = partition::parse_method(over_ranks ? "hypergraph" : method);
  if (over_ranks) options.zoltan_params = partition::hypergraph_over_ranks_params();
  reset_peak_rss();
  const Stopwatch clock;
  const partition::Partition cut = partition::partition_graph(a, options);
  row.partition_s = clock.seconds();
  row.peak_gib = static_cast<double>(peak_rss_bytes()) / (1 << 30);
  row.quality = partition::measure(a, cut);
  const Parts counts = count_parts(a, cut, row.quality);

  std::int64_t exchanged_width = 0; // summed over the layers that exchange (both directions)
  for (const gnn::LayerShape& layer : gcn_layers(c, gnn::PartCounts{})) {
    if (layer.has_halo) exchanged_width += layer.exchanged_width();
  }
  for (std::size_t p = 0; p < counts.counts.size(); ++p) {
    const gnn::PartCounts& part = counts.counts[p];
    const std::int64_t received = part.n_local - part.n_owned;
    const Step step = predict_step(c, part, [&](std::int64_t row_bytes) {
      const auto most = static_cast<double>(std::max(received, part.rows_sent));
      return c.wire_seconds(counts.peers[p], most * static_cast<double>(row_bytes));
    });
    if (step.total_ms() > row.epoch.total_ms()) row.epoch = step;
    row.max_part_nnz = std::max(row.max_part_nnz, part.nnz);
    row.max_peers = std::max(row.max_peers, counts.peers[p]);
    row.mb = std::max(row.mb, static_cast<double>((received + part.rows_sent) * exchanged_width) *
                                  sizeof(float) / 1e6);
  }
  row.one_d = cagnet_1d(c, a, parts);
  for (const int rep : c.replication)
    row.one_half_d.push_back(cagnet_15d(c, a, parts, rep));
  return row;
}

void print_assumptions(const Setup& c, bool peak_resets) {
  fmt::print("Assumptions (per device, one per part):\n");
  fmt::print("  memory {:.0f} GB/s effective for SpMM (the cost model's no-reuse bytes), packing "
             "and GEMM operands (A100 40 GB: 1555 GB/s HBM2e)\n",
             c.memory_gbps);
  fmt::print("  GEMM {:.1f} TFLOP/s (A100 fp32 without TF32), roofline with the memory rate\n",
             c.gemm_tflops);
  fmt::print("  network: one {:.0f} Gb/s link per device, {:.1f} us per message; a part's messages "
             "queue on its link (peers x latency + larger direction's bytes / bandwidth)\n",
             c.link_gbits, c.latency_us);
  fmt::print("  GCN widths {}; fp32 rows; weight-gradient allreduce, loss and activations left "
             "out (the same for every algorithm)\n",
             fmt::join(c.widths, "-"));
  fmt::print("  ours (cost model, gnn::predict_layer): the narrower-width order, layer 0's ghost "
             "input rows cached (no exchange), later layers exchange both ways; the exchange "
             "overlaps the interior rows' SpMM forward and the owned rows' SpMM backward; the "
             "epoch is the slowest part\n");
  fmt::print("  CAGNET: aggregate first, every SpMM broadcasts its dense input (forward: layer "
             "input, backward: output gradient), broadcasts log2 steps at the bandwidth bound, no "
             "overlap; compute by the same cost model on its largest block row\n");
  fmt::print("  peak: resident high-water mark during the partition call{}\n",
             peak_resets ? " (graph included)" : " (not resettable here: process peak so far)");
  fmt::print("  volume: rows one exchange moves, all parts; max recv: most rows one part receives; "
             "peers: most parts one part exchanges with; "
             "MB: most a process receives per epoch; ratio: best CAGNET / ours\n\n");
}

void print_header(const Setup& c) {
  fmt::print(
      "{:>5} {:>9} {:>10} {:>5} {:>16} {:>8} {:>6} {:>10} {:>9} {:>5} {:>5} {:>5} {:>8} {:>23}",
      "scale", "n", "nnz", "P", "method", "part s", "GiB", "volume", "max recv", "peers", "vbal",
      "ebal", "ours MB", "ours ms (comp / comm)");
  fmt::print(" {:>8} {:>8}", "1D MB", "1D ms");
  for (const int rep : c.replication)
    fmt::print(" {:>8} {:>8}", fmt::format("c={} MB", rep), fmt::format("c={} ms", rep));
  fmt::print(" {:>6}\n", "ratio");
}

void print_row(const Row& r) {
  fmt::print("{:>5} {:>9} {:>10} {:>5} {:>16} {:>8.1f} {:>6.1f} {:>10} {:>9} {:>5} {:>5.2f} "
             "{:>5.2f} {:>8.1f} {:>9.2f} ({:>5.2f} / {:>5.2f})",
             r.scale, r.n, r.nnz, r.parts, r.method, r.partition_s, r.peak_gib,
             r.quality.total_volume, r.quality.max_recv, r.max_peers, r.quality.vertex_balance,
             r.quality.edge_balance, r.mb, r.epoch.total_ms(), r.epoch.compute_ms, r.epoch.comm_ms);
  fmt::print(" {:>8.0f} {:>8.1f}", r.one_d.mb, r.one_d.ms);
  for (const Cagnet& x : r.one_half_d) {
    if (x.ms > 0)
      fmt::print(" {:>8.0f} {:>8.1f}", x.mb, x.ms);
    else
      fmt::print(" {:>8} {:>8}", "-", "-");
  }
  fmt::print(" {:>5.1f}x\n", r.best_cagnet_ms() / r.epoch.total_ms());
  std::fflush(stdout);
}

nlohmann::json to_json(const Setup& c, const std::vector<Row>& rows) {
  nlohmann::json out;
  out["assumptions"] = {{"memory_gbps", c.memory_gbps}, {"gemm_tflops", c.gemm_tflops},
                        {"link_gbits", c.link_gbits},   {"latency_us", c.latency_us},
                        {"widths", c.widths},           {"replication", c.replication}};
  out["rows"] = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json one_half_d = nlohmann::json::array();
    for (std::size_t i = 0; i < r.one_half_d.size(); ++i)
      one_half_d.push_back(
          {{"c", c.replication[i]}, {"mb", r.one_half_d[i].mb}, {"epoch_ms", r.one_half_d[i].ms}});
    out["rows"].push_back({{"scale", r.scale},
                           {"n", r.n},
                           {"nnz", r.nnz},
                           {"parts", r.parts},
                           {"method", r.method},
                           {"partition_s", r.partition_s},
                           {"peak_gib", r.peak_gib},
                           {"total_volume", r.quality.total_volume},
                           {"max_recv", r.quality.max_recv},
                           {"max_send", r.quality.max_send},
                           {"vertex_balance", r.quality.vertex_balance},
                           {"edge_balance", r.quality.edge_balance},
                           {"max_part_nnz", r.max_part_nnz},
                           {"max_peers", r.max_peers},
                           {"mb", r.mb},
                           {"epoch_ms", r.epoch.total_ms()},
                           {"compute_ms", r.epoch.compute_ms},
                           {"comm_ms", r.epoch.comm_ms},
                           {"cagnet_1d", {{"mb", r.one_d.mb}, {"epoch_ms", r.one_d.ms}}},
                           {"cagnet_15d", one_half_d}});
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Partition large RMAT graphs into many parts and predict a GCN epoch on a cluster, "
               "next to CAGNET's 1D and 1.5D algorithms."};
  Setup c;
  std::int64_t features = 128, hidden = 128, classes = 16;
  std::vector<int> scales{22}, part_counts{64, 128, 256, 512, 1024};
  std::vector<std::string> methods{"metis", "hypergraph-ranks"};
  int max_hypergraph_scale = 18;
  std::string json;
  app.add_option("--scales", scales, "RMAT scales (2^scale nodes, edge factor 16)")
      ->capture_default_str();
  app.add_option("--parts", part_counts, "part counts")->capture_default_str();
  app.add_option("--methods", methods,
                 "partition methods: tessera-partition's, or hypergraph-ranks (the hypergraph cut "
                 "with the settings it has over ranks, the distributed default)")
      ->capture_default_str();
  app.add_option("--max-hypergraph-scale", max_hypergraph_scale,
                 "largest scale the hypergraph methods run at")
      ->capture_default_str();
  app.add_option("--features", features, "GCN input width")->capture_default_str();
  app.add_option("--hidden", hidden, "GCN hidden width")->capture_default_str();
  app.add_option("--classes", classes, "GCN output width")->capture_default_str();
  app.add_option("--memory-gbps", c.memory_gbps, "device memory GB/s effective")
      ->capture_default_str();
  app.add_option("--gemm-tflops", c.gemm_tflops, "device GEMM TFLOP/s")->capture_default_str();
  app.add_option("--link-gbits", c.link_gbits, "network Gb/s per device")->capture_default_str();
  app.add_option("--latency-us", c.latency_us, "microseconds per message")->capture_default_str();
  app.add_option("--replication", c.replication, "CAGNET 1.5D replication factors")
      ->capture_default_str();
  app.add_option("--json", json, "also write the rows to this file");
  CLI11_PARSE(app, argc, argv);
  c.widths = {features, hidden, classes};

  try {
    const BackendPtr cpu = make_cpu_backend();
    const bool peak_resets = reset_peak_rss();
    print_assumptions(c, peak_resets);
    print_header(c);
    std::vector<Row> rows;
    std::map<int, std::pair<std::int64_t, double>> hypergraph_seen; // P -> (nnz, seconds)
    for (const int scale : scales) {
      const Stopwatch clock;
      const datasets::Dataset data = datasets::load_dataset(
          cpu, fmt::format("rmat:scale={},edge-factor=16,features=1,classes=2", scale), {});
      fmt::print("# scale {}: generated in {:.1f} s\n", scale, clock.seconds());
      for (const int parts : part_counts) {
        for (const std::string& method : methods) {
          const bool hypergraph = method.starts_with("hypergraph");
          if (hypergraph && scale > max_hypergraph_scale) {
            const auto seen = hypergraph_seen.find(parts);
            if (seen != hypergraph_seen.end()) {
              const auto [nnz, seconds] = seen->second;
              fmt::print("# hypergraph skipped above scale {}: {:.0f} s there at P = {}, so at "
                         "least ~{:.0f} s here (linear in the nonzeros)\n",
                         max_hypergraph_scale, seconds, parts,
                         seconds * static_cast<double>(data.adjacency.nnz()) /
                             static_cast<double>(nnz));
            } else {
              fmt::print("# hypergraph skipped above scale {}\n", max_hypergraph_scale);
            }
            continue;
          }
          rows.push_back(run(c, data.adjacency, scale, parts, method));
          if (hypergraph) hypergraph_seen[parts] = {rows.back().nnz, rows.back().partition_s};
          print_row(rows.back());
        }
      }
    }
    if (!json.empty()) {
      std::ofstream(json) << to_json(c, rows).dump(2) << '\n';
      fmt::print("rows written to {}\n", json);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
