// One aggregating layer's halo traffic under an exchange mode — exact, stale (PipeGCN) or skip
// (Sancus) — behind one split-phase interface, so a graph layer never knows which moves its rows.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tessera::comm {

/// What a layer's training exchanges deliver. Evaluation passes are exact in every mode.
enum class HaloMode {
  Exact, ///< the rows of this epoch (the default)
  Stale, ///< the rows of the previous epoch (PipeGCN): this epoch's travel while a whole epoch
         ///< computes; the first epoch (and the first after a resume) is exact
  Skip   ///< an owner re-sends a row only when it changed by more than a threshold since it was
         ///< last sent, or has gone unsent for a bound of epochs (Sancus); else the last one sent
};
/// "exact", "stale" or "skip".
std::string to_string(HaloMode mode);

/// How one layer's halo messages travel (the same on every rank of a job).
struct ExchangeOptions {
  HaloMode mode = HaloMode::Exact;
  HaloPrecision precision = HaloPrecision::Fp32; ///< message rows: exact, bf16 or int8
  std::uint64_t seed = 0;                        ///< keys int8's stochastic rounding
  /// Stale: the rows used (features and gradients) are smoothed over epochs, used =
  /// s·used_before + (1 − s)·received (PipeGCN-GF); 0: the received rows as they are. In [0, 1).
  /// 0.95 is PipeGCN's γ: on a graph whose every owned row is a boundary row (SBM 20k, 4 ranks,
  /// 400 epochs, 10 seeds) it trains to exact's accuracy where unsmoothed rows lose 2.2 points.
  double smoothing = 0.95;
  /// Skip: a row is re-sent when ‖row − last sent‖₂ > threshold · ‖last sent‖₂. ≥ 0; 0 sends
  /// every row that changed at all (exact, fewer bytes when rows repeat).
  double skip_threshold = 0.0;
  /// Skip: a row is re-sent at least every this many epochs, drifted or not. ≥ 1.
  int skip_max_age = 4;

  /// Throws InvalidArgument naming the setting (staleness smoothing, halo skip threshold, halo
  /// skip max age) and the accepted values for a value out of range.
  void validate() const;
};
/// For logs: "exact, fp32 messages", "stale (smoothing 0.9), bf16 messages", "skip (τ 0.05,
/// every ≤ 4 epochs), fp32 messages".
std::string describe(const ExchangeOptions& options);

/// Whether a forward pass trains (and may use stale or skipped rows) or evaluates (exact rows).
enum class Pass { Training, Evaluation };

/// One layer's gather (owner → ghost rows, forward) and scatter-add (ghost rows → owners,
/// backward) over a HaloPlan, split-phase (begin, compute what needs no ghost row, end). One
/// begin of an object is open at a time (a mode may keep messages in flight between calls: that
/// is its own business); every rank of the plan must make the same calls with the same width in
/// the same order (each begin is collective over the plan's ranks). Rows are in the memory of
/// backend(). A begin while another is open, or an end without its begin, throws
/// InvalidArgument.
template <typename T> class LayerExchange {
public:
  virtual ~LayerExchange() = default;
  LayerExchange(const LayerExchange&) = delete;
  LayerExchange& operator=(const LayerExchange&) = delete;

  /// Starts filling the ghost rows of x ([n_local, w]) with their owners' rows (of this epoch,
  /// or as the mode delivers them). The owned rows are read now; the ghost rows must not be
  /// touched until end_gather(). Collective over the plan's ranks.
  virtual void begin_gather(DenseView<T> x, Pass pass) = 0;
  /// The same for a caller that packs and unpacks rows itself: `send` [num_send_rows, w] holds
  /// the plan's send rows in its order (read now), `ghosts` [n_ghost, w] gets the ghost rows by
  /// end_gather(). Collective over the plan's ranks.
  virtual void begin_gather_rows(ConstDenseView<T> send, DenseView<T> ghosts, Pass pass) = 0;
  /// Completes the open gather.
  virtual void end_gather() = 0;

  /// Starts adding the ghost rows of dx ([n_local, w]) into their owners' rows on other ranks
  /// (read now). The other ranks' shares of the owned rows are added at end_scatter_add() to
  /// what they hold then, peer by peer in rank order. Collective over the plan's ranks.
  virtual void begin_scatter_add(DenseView<T> dx) = 0;
  /// The same for a caller that adds the shares itself: `send` [n_ghost, w] the ghost rows'
  /// shares (read now); `received` [num_send_rows, w] gets the peers' shares of the plan's send
  /// rows, block by block as send_blocks() lays them out, by end_scatter_add(). Collective over
  /// the plan's ranks.
  virtual void begin_scatter_rows(ConstDenseView<T> send, DenseView<T> received) = 0;
  /// Completes the open scatter-add.
  virtual void end_scatter_add() = 0;

  /// Moves the messages in flight on without blocking: Open MPI progresses them only inside
  /// MPI calls, so a caller computing between begin and end calls this now and then.
  virtual void progress() = 0;

  /// Work for the time an end (or a mode's wait for messages begun earlier) would sit idle:
  /// called while messages are in flight until they arrive or it returns false (see
  /// HaloExchange::set_idle_work). Empty: none.
  virtual void set_idle_work(std::function<bool()> work) = 0;

  /// Bytes moved and time spent since construction (or reset_stats()), all directions.
  virtual HaloStats stats() const = 0;
  virtual void reset_stats() = 0;
  /// Bytes of the buffers the mode keeps (the rows in flight and the rows held for later).
  virtual std::size_t bytes() const = 0;

  const HaloPlan& plan() const noexcept { return *plan_; }
  const BackendPtr& backend() const noexcept { return backend_; }
  const ExchangeOptions& options() const noexcept { return options_; }

protected:
  LayerExchange(std::shared_ptr<const HaloPlan> plan, BackendPtr backend, ExchangeOptions options)
      : plan_(std::move(plan)), backend_(std::move(backend)), options_(options) {}

private:
  std::shared_ptr<const HaloPlan> plan_;
  BackendPtr backend_;
  ExchangeOptions options_;
};

/// The exchange of aggregating layer `layer` (0, 1, ... in model order: it picks the message
/// tags) in `options.mode`, in `backend`'s memory (outside any chunks: messages land at any
/// time). Throws InvalidArgument for options out of range. Keeps `comm` and `plan` alive.
template <typename T>
std::unique_ptr<LayerExchange<T>>
make_layer_exchange(std::shared_ptr<Communicator> comm, std::shared_ptr<const HaloPlan> plan,
                    BackendPtr backend, int layer, const ExchangeOptions& options);

} // namespace tessera::comm
