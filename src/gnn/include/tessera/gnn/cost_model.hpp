// The scheduler's cost model: what one rank's kernels and links do per second, measured at start,
// turned into a predicted time for each aggregating layer under each exchange mode — what
// `--schedule auto` picks a layer's exchange by, and what the report sets against measurement.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/comm/layer_exchange.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace tessera::gnn {

/// One aggregating layer as the model sees it (GcnConv: Â·x·W + b).
struct LayerShape {
  std::int64_t in = 0, out = 0; ///< widths of the input and output
  bool transform_first = true;  ///< x·W first (exchanging `out`-wide rows), else Â·x (`in`-wide)
  bool has_halo = false;        ///< whether its input's ghost rows are exchanged
  bool input_gradient = true;   ///< whether its backward computes dx (not the first layer)
  std::int64_t input_rows = 0;  ///< rows of its input: n_local with cached ghosts, else n_owned
  /// The width of the rows its exchanges move.
  std::int64_t exchanged_width() const noexcept { return transform_first ? out : in; }
};

/// Rates of this rank's backend, measured on its own aggregation matrix.
struct RankRates {
  /// SpMM, bytes of the no-reuse model (spmm_model_bytes) per second, at each width measured
  /// (ascending): narrow rows gather at a lower rate than wide ones.
  std::vector<std::pair<std::int64_t, double>> spmm_gbps;
  /// The GEMMs of each layer measured (forward x·W or (Â·x)·W, dW, dx at their shapes),
  /// milliseconds a step: narrow products run far from the machine's peak.
  struct LayerGemms {
    LayerShape shape;
    double ms = 0.0;
  };
  std::vector<LayerGemms> gemms;
  double gemm_gflops = 0.0; ///< GEMM of [rows, w] by [w, w] at the widest width measured
  double copy_gbps = 0.0;   ///< packing rows (gather_rows), bytes read and written per second
  /// Encoding and decoding rows for a message, fp32 bytes of rows per second, by precision
  /// (fp32: the copy through host memory a staged device rank makes; 0 on the host: none).
  double encode_gbps[3] = {0.0, 0.0, 0.0};

  /// The SpMM rate measured at the width nearest `width` (0 when none was).
  double spmm_gbps_at(std::int64_t width) const noexcept;
};

/// Measures `backend`'s rates: SpMM of `s` ([n_owned, n_local], this rank's aggregation matrix)
/// at the width each of `layers` aggregates, each layer's GEMMs at their shapes, and at the
/// widest width packing and encoding rows; each the median of a few runs after a warm-up.
/// `together`, when set, runs before each timing, the same number of times on every rank for
/// the same `layers` (even with no rows): a barrier there makes the ranks of a job time each
/// kernel at once, so ranks sharing cores measure the share they get while all compute, as in
/// training (alone, one measures a whole core while its neighbour waits).
RankRates measure_rank_rates(const BackendPtr& backend, const Csr& s,
                             std::span<const LayerShape> layers,
                             const std::function<void()>& together = {});

/// A layer's predicted time per training step (forward + backward), in milliseconds.
struct LayerPrediction {
  double compute_ms = 0.0;  ///< its GEMMs, SpMMs, bias, and packing and encoding its messages
  double transfer_ms = 0.0; ///< its messages on the wire, both directions
  double wait_ms = 0.0;     ///< the part of the transfer no computation hides
  double total_ms() const noexcept { return compute_ms + wait_ms; }
};

/// A rank's tile as the cost model counts it: what its aggregation matrix and halo plan hold.
struct PartCounts {
  std::int64_t n_owned = 0;    ///< rows it owns (the aggregation matrix's rows)
  std::int64_t n_local = 0;    ///< owned + ghost rows (its columns); ghost rows are those received
  std::int64_t n_interior = 0; ///< owned rows that read no ghost row
  std::int64_t nnz = 0;        ///< nonzeros of the aggregation matrix
  std::int64_t rows_sent = 0;  ///< rows one exchange sends, to all peers together
};

/// Seconds one exchange of `row_bytes`-byte rows spends on the wire (0 bytes: its latency alone).
using WireSeconds = std::function<double(std::int64_t row_bytes)>;

/// The time of `layer`'s training step on a tile of `part`'s counts at `rates`, with its halo
/// exchanged under `exchange` over `wire`:
/// exact: the messages of each direction travel while the rows that need none compute
/// (forward: the interior rows' SpMM; backward: the owned rows'), the rest is waited for;
/// stale: they travel while a whole step (`step_compute_ms`) computes; skip: as exact with every
/// row re-sent (the rows that will drift are not known in advance) and a bitmap round trip.
LayerPrediction predict_layer(const RankRates& rates, const PartCounts& part,
                              const LayerShape& layer, const comm::ExchangeOptions& exchange,
                              const WireSeconds& wire, double step_compute_ms = 0.0);

/// A part's predicted compute per training step on one rank, split by what drives it:
/// time ≈ per_nonzero_ms · nonzeros of its aggregation matrix + per_row_ms · its owned rows
/// (SpMMs scale with the nonzeros; GEMMs, bias and the row terms of the SpMMs with the rows).
/// Halo exchanges are not in it: what balancing equalizes is the compute.
struct PartCost {
  double per_nonzero_ms = 0.0, per_row_ms = 0.0;
  /// What a row costs beyond its nonzeros, in nonzeros (0 when nothing was measured).
  double row_cost() const noexcept { return per_nonzero_ms > 0 ? per_row_ms / per_nonzero_ms : 0; }
};

/// The PartCost of `layers` (their input_rows: the part's rows, no halo) from `rates` measured on
/// a matrix of `rows` rows and `nnz` nonzeros: the cost model's compute prediction at that size
/// and at twice the nonzeros, solved for the two terms.
PartCost predict_part_cost(const RankRates& rates, std::span<const LayerShape> layers,
                           std::int64_t rows, std::int64_t nnz);

/// Predicts layer times on one rank from its rates, its links to its halo peers, and its tile.
class CostModel {
public:
  /// links: one estimate per halo peer (comm::measure_links); plan: this rank's halo plan
  /// (nullptr on one process, where n_local == n_owned); nnz: of the aggregation matrix;
  /// n_interior: owned rows that read no ghost row.
  CostModel(RankRates rates, std::vector<comm::LinkEstimate> links,
            std::shared_ptr<const comm::HaloPlan> plan, std::int64_t n_owned, std::int64_t n_local,
            std::int64_t n_interior, std::int64_t nnz);

  /// The time of `layer`'s training step with its halo exchanged under `exchange`: predict_layer
  /// on this rank's counts and links.
  LayerPrediction predict(const LayerShape& layer, const comm::ExchangeOptions& exchange,
                          double step_compute_ms = 0.0) const;

  /// Of `candidates`, the exchange with the least predicted time for `layer` (the first on a
  /// tie: put exact first). step_compute_ms: the whole step's compute, what a stale exchange
  /// hides behind.
  comm::ExchangeOptions choose(const LayerShape& layer,
                               std::span<const comm::ExchangeOptions> candidates,
                               double step_compute_ms) const;

  const RankRates& rates() const noexcept { return rates_; }

private:
  /// Seconds of one exchange of `row_bytes`-byte rows with every halo peer: per peer its
  /// latency and the larger of what goes each way over its bandwidth; the slowest peer
  /// (messages to different peers travel together).
  double transfer_seconds(std::int64_t row_bytes) const;

  RankRates rates_;
  std::vector<comm::LinkEstimate> links_;
  std::shared_ptr<const comm::HaloPlan> plan_;
  std::int64_t n_owned_, n_local_, n_interior_, nnz_;
};

} // namespace tessera::gnn
