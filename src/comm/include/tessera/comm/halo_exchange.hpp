// Split-phase halo exchanges over a HaloPlan: gather (owner → ghost) and scatter-add
// (ghost → owner), with reusable buffers and byte counters.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/core/timer.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace tessera::comm {

/// How halo messages carry their rows (--halo-precision): exact, or compressed per row.
enum class HaloPrecision {
  Fp32, ///< the rows as they are (exact)
  Bf16, ///< bfloat16, rounded to nearest even: half the bytes of fp32
  Int8  ///< per row a float scale (max |value| / 127) and int8 values rounded stochastically
        ///< (unbiased to 1/512 of a step; keyed by the counter RNG, so runs repeat bit for
        ///< bit): a quarter
};
/// "fp32", "bf16" or "int8"; parse throws InvalidArgument naming the setting, the text and
/// the accepted values.
std::string to_string(HaloPrecision precision);
HaloPrecision parse_halo_precision(const std::string& text);
/// Bytes one row of `width` values of `value_bytes` (4 or 8) takes in a message.
std::size_t encoded_row_bytes(HaloPrecision precision, std::int64_t width, std::size_t value_bytes);
/// Host rows → message bytes ([rows.rows * encoded_row_bytes], written to `out`). Int8 rounds
/// element (i, j) up with probability equal to its fraction, drawn at (row_key + i, j) of `key`.
template <typename T>
void encode_rows(HaloPrecision precision, ConstDenseView<T> rows, std::span<std::byte> out,
                 const RngKey& key, std::int64_t row_key);
/// Message bytes → host rows (the inverse of encode_rows up to its rounding).
template <typename T>
void decode_rows(HaloPrecision precision, std::span<const std::byte> in, DenseView<T> rows);

/// What one HaloExchange has moved since it was made (or reset).
struct HaloStats {
  std::int64_t exchanges = 0;      ///< exchanges started
  std::int64_t bytes_sent = 0;     ///< payload bytes sent to other ranks
  std::int64_t bytes_received = 0; ///< payload bytes received from other ranks
  double start_seconds = 0.0;      ///< packing and posting messages
  double wait_seconds = 0.0;       ///< blocked in wait(), including the scatter-add's unpack

  /// Adds `other`'s counters and times to these.
  HaloStats& operator+=(const HaloStats& other) noexcept {
    exchanges += other.exchanges;
    bytes_sent += other.bytes_sent;
    bytes_received += other.bytes_received;
    start_seconds += other.start_seconds;
    wait_seconds += other.wait_seconds;
    return *this;
  }
};

/// Exchanges rows of [n_owned + n_ghost, w] matrices laid out as the plan's local numbering, in
/// the memory of the exchange's backend. Device rows travel through page-locked host buffers
/// (allocated once, grown with the width) when the communicator cannot take device memory
/// (Debian's Open MPI is not CUDA-aware); rows received that way land in device memory in stream
/// order, as a kernel's output does: the backend's work queued after wait() sees them.
/// One exchange may be in flight at a time; every rank of the plan must start the same kind
/// of exchange with the same width in the same order (each exchange is collective over the
/// plan's ranks).
template <typename T> class HaloExchange {
public:
  /// A started exchange; pass it to wait(). Move-only.
  class Request {
  public:
    /// A request not started (inactive).
    Request() = default;
    /// Whether it was started and not yet waited for.
    bool active() const noexcept { return pending_ != nullptr; }

  private:
    friend class HaloExchange;
    enum class Kind { Gather, ScatterAdd, Rows };
    Kind kind_ = Kind::Gather;
    DenseView<T> x_;  // the matrix of the exchange
    DenseView<T> in_; // where received rows land (ghost rows, or the scatter-add buffer)
    std::unique_ptr<Pending> pending_;
  };

  /// tag: separates this exchange's messages from other exchanges on the same communicator.
  /// Copies the plan's send rows to `backend`; no communication. Keeps `comm` and `plan` alive.
  HaloExchange(std::shared_ptr<Communicator> comm, std::shared_ptr<const HaloPlan> plan,
               BackendPtr backend, int tag);
  /// Waits for a copy still reading the host staging buffer (never throws).
  ~HaloExchange();
  HaloExchange(const HaloExchange&) = delete;
  HaloExchange& operator=(const HaloExchange&) = delete;

  /// Starts filling the ghost rows of x ([n_local, w]) with their owners' rows. The owned rows
  /// are read now; the ghost rows must not be read or written until wait(). Throws
  /// DimensionMismatch when x does not have n_local rows. Collective over the plan's ranks.
  Request start_gather(DenseView<T> x);
  /// Starts adding the ghost rows of dx ([n_local, w]) into their owners' rows on other ranks.
  /// The ghost rows are read until wait() and must not change; the other ranks' contributions
  /// to this rank's owned rows arrive in a separate buffer and are added at wait() to whatever
  /// the owned rows hold then (so they may still be computed while the messages fly). Throws
  /// DimensionMismatch when dx does not have n_local rows. Collective over the plan's ranks.
  Request start_scatter_add(DenseView<T> dx);
  /// The messages of start_gather and start_scatter_add for a caller that packs and unpacks
  /// the rows itself (a matrix acquired a row block at a time under a memory budget). Gather:
  /// `send` [num_send_rows, w] holds the plan's send rows in its order, `receive` [n_ghost, w]
  /// gets the ghost rows. Scatter-add: `send` [n_ghost, w] holds the ghost rows' shares,
  /// `receive` [num_send_rows, w] gets the peers' shares of the plan's send rows, block by
  /// block as send_blocks() lays them out, not added (the caller adds them). Both in the
  /// backend's memory, unchanged until wait(). Throws DimensionMismatch for other shapes.
  /// Collective over the plan's ranks, and interchangeable with start_gather/start_scatter_add:
  /// a rank may use either where its peers use the other.
  Request start_gather_rows(ConstDenseView<T> send, DenseView<T> receive);
  Request start_scatter_rows(ConstDenseView<T> send, DenseView<T> receive);
  /// Completes the exchange (for start_scatter_add, adds the received rows, peer by peer in
  /// rank order, so the sum is the same every run) and leaves `request` inactive. Throws
  /// InvalidArgument for an inactive request.
  void wait(Request& request);

  /// x's rows the peers read ([n_local, w] → [num_send_rows, w] in the plan's order), for a
  /// caller that sends them later with start_gather_rows. No communication.
  void pack(ConstDenseView<T> x, DenseView<T> packed);
  /// Adds the peers' shares of the owned rows, as start_scatter_rows receives them
  /// ([num_send_rows, w]), into dx ([n_local, w]), peer by peer in rank order: what wait() does
  /// for start_scatter_add. No communication.
  void add_shares(ConstDenseView<T> received, DenseView<T> dx);

  /// Moves a started exchange's messages on without blocking (Open MPI progresses them only
  /// inside MPI calls); true once wait() would return at once. An inactive request: true.
  bool test(Request& request);

  /// Work for the time wait() would sit idle: while messages are still in flight, wait() calls
  /// `work` (moving them on between calls) until they arrive or it returns false ("nothing left
  /// worth doing"), then blocks. The chunk manager's prefetch goes here: the epoch's halo waits
  /// are slots on the timeline its trace reads. Empty: none. Its time counts as waiting.
  void set_idle_work(std::function<bool()> work) { idle_work_ = std::move(work); }

  /// gather then wait. Collective over the plan's ranks.
  void gather(DenseView<T> x);
  /// scatter-add then wait. Collective over the plan's ranks.
  void scatter_add(DenseView<T> dx);

  /// Compresses the messages of every later exchange (both directions, HaloPrecision) with
  /// int8's rounding keyed by `seed`, this rank and the exchange's count. Device rows then go
  /// through host buffers, where they are encoded and decoded. Every rank of the plan must set
  /// the same precision.
  void set_precision(HaloPrecision precision, std::uint64_t seed);
  HaloPrecision precision() const noexcept { return precision_; }

  /// The plan this exchange follows.
  const HaloPlan& plan() const noexcept { return *plan_; }
  /// The backend whose memory the exchange's buffers and rows are in.
  const BackendPtr& backend() const noexcept { return backend_; }
  /// Counters since construction or the last reset_stats().
  const HaloStats& stats() const noexcept { return stats_; }
  void reset_stats() noexcept { stats_ = {}; }
  /// Bytes of the reusable row buffers (packed rows and host staging; not the send-row ids).
  std::size_t bytes() const noexcept {
    return buffer_.bytes() + send_stage_.size() + recv_stage_.size();
  }

private:
  void check_shape(const char* what, ConstDenseView<T> x) const;
  /// Throws DimensionMismatch unless `send` and `receive` have `send_rows` and `receive_rows`
  /// rows of one width.
  void check_rows(const char* what, ConstDenseView<T> send, std::int64_t send_rows,
                  DenseView<T> receive, std::int64_t receive_rows) const;
  /// Throws DimensionMismatch unless `rows` is [num_send_rows, width] (the plan's send rows).
  void check_send_rows(const char* what, ConstDenseView<T> rows, std::int64_t width) const;
  /// Posts one exchange of x's rows: `out` (block b = rows [b.begin, b.begin + b.count)) goes to
  /// the peers of `out_blocks`, `in` receives from the peers of `in_blocks`.
  Request post(typename Request::Kind kind, DenseView<T> x, ConstDenseView<T> out,
               const std::vector<HaloPlan::Block>& out_blocks, DenseView<T> in,
               const std::vector<HaloPlan::Block>& in_blocks, const Stopwatch& clock);
  /// [num_send_rows, w] view of the reusable buffer.
  DenseView<T> buffer(std::int64_t width);
  /// The staging buffers, at least `send_bytes` and `recv_bytes`, once the copy out of the
  /// receive stage (from the last wait()) has finished.
  void prepare_stages(std::size_t send_bytes, std::size_t recv_bytes);

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<const HaloPlan> plan_;
  BackendPtr backend_;
  int tag_;
  Buffer<T> buffer_;          // packed rows to send (gather) or received rows (scatter-add)
  Buffer<LocalId> send_rows_; // the plan's send rows in the backend's memory
  bool staged_ = false;       // device data through host buffers
  PinnedBuffer send_stage_, recv_stage_;
  std::shared_ptr<Event> recv_copy_; // the copy from recv_stage_ to the device, if any
  HaloPrecision precision_ = HaloPrecision::Fp32;
  std::uint64_t seed_ = 0;
  std::vector<std::byte> send_code_, recv_code_; // encoded messages (compressed precisions)
  std::uint64_t encoded_ = 0;                    // exchanges encoded: keys their rounding
  std::function<bool()> idle_work_;              // what wait() does while messages fly

  HaloStats stats_;
};

/// The one-off gather of a sparse matrix's rows: owned: [n_owned, f] CSR in host memory;
/// returns [n_local, f] on owned's backend with the owned rows followed by every ghost row
/// copied from its owner. (Sparse input features are static: fetched once, then reused.)
/// `stats` (optional) gets one exchange and its bytes added. Throws InvalidArgument for a matrix
/// not in host memory, DimensionMismatch when owned does not have n_owned rows, FormatError for
/// a received column outside [0, f).
/// Collective over the plan's ranks.
Csr gather_sparse_rows(Communicator& comm, const HaloPlan& plan, const Csr& owned,
                       HaloStats* stats = nullptr);

} // namespace tessera::comm
