// The exchange modes of a layer's halo: exact (HaloExchange as it is), stale (last epoch's rows,
// this epoch's in flight) and skip (only the rows that drifted are re-sent).
#include "tessera/comm/layer_exchange.hpp"

#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/ops/ops.hpp"

#include <cmath>
#include <cstring>
#include <fmt/core.h>
#include <vector>

namespace tessera::comm {

std::string to_string(HaloMode mode) {
  switch (mode) {
  case HaloMode::Exact:
    return "exact";
  case HaloMode::Stale:
    return "stale";
  case HaloMode::Skip:
    return "skip";
  }
  return "?";
}

void ExchangeOptions::validate() const {
  if (!(smoothing >= 0.0 && smoothing < 1.0)) {
    throw InvalidArgument(
        fmt::format("staleness smoothing {}: expects a value in [0, 1)", smoothing));
  }
  if (!(skip_threshold >= 0.0) || !std::isfinite(skip_threshold)) {
    throw InvalidArgument(fmt::format("halo skip threshold {}: expects a finite value >= 0 (a "
                                      "relative change of a row)",
                                      skip_threshold));
  }
  if (skip_max_age < 1) {
    throw InvalidArgument(fmt::format("halo skip max age {}: expects a whole number of epochs "
                                      ">= 1",
                                      skip_max_age));
  }
}

std::string describe(const ExchangeOptions& o) {
  std::string mode = to_string(o.mode);
  if (o.mode == HaloMode::Stale && o.smoothing > 0) {
    mode += fmt::format(" (smoothing {:g})", o.smoothing);
  } else if (o.mode == HaloMode::Skip) {
    mode += fmt::format(" (τ {:g}, every ≤ {} epochs)", o.skip_threshold, o.skip_max_age);
  }
  return mode + ", " + to_string(o.precision) + " messages";
}

namespace {

/// [rows, width] view of `buffer` (in `backend`'s memory), grown as needed.
template <typename T>
DenseView<T> rows_in(Buffer<T>& buffer, const BackendPtr& backend, std::int64_t rows,
                     std::int64_t width) {
  if (buffer.size() < rows * width) buffer = Buffer<T>(backend, rows * width);
  return DenseView<T>(buffer.data(), rows, width);
}

/// The ghost rows of a [n_local, w] matrix.
template <typename T> DenseView<T> ghost_rows(const HaloPlan& plan, DenseView<T> x) {
  return x.slice_rows(plan.n_owned(), plan.n_local());
}

/// What is open on a layer exchange: nothing, a gather or a scatter-add; one at a time.
class OpenCall {
public:
  enum class Kind { None, Gather, Scatter };
  void begin(Kind kind) {
    if (open_ != Kind::None) {
      throw InvalidArgument(std::string("layer exchange: ") + name(kind) + " begun while a " +
                            name(open_) + " is open (end it first)");
    }
    open_ = kind;
  }
  void end(Kind kind) {
    if (open_ != kind) {
      throw InvalidArgument(std::string("layer exchange: end of a ") + name(kind) +
                            " that was not begun");
    }
    open_ = Kind::None;
  }

private:
  static const char* name(Kind kind) {
    return kind == Kind::Gather ? "gather" : kind == Kind::Scatter ? "scatter-add" : "call";
  }
  Kind open_ = Kind::None;
};

/// Exact: every call as HaloExchange makes it.
template <typename T> class ExactExchange final : public LayerExchange<T> {
public:
  ExactExchange(std::shared_ptr<Communicator> comm, std::shared_ptr<const HaloPlan> plan,
                BackendPtr backend, int layer, const ExchangeOptions& options)
      : LayerExchange<T>(plan, backend, options),
        halo_(std::move(comm), plan, backend, tags::layer(layer)) {
    halo_.set_precision(options.precision, options.seed);
  }

  void begin_gather(DenseView<T> x, Pass) override {
    open_.begin(OpenCall::Kind::Gather);
    request_ = halo_.start_gather(x);
  }
  void begin_gather_rows(ConstDenseView<T> send, DenseView<T> ghosts, Pass) override {
    open_.begin(OpenCall::Kind::Gather);
    request_ = halo_.start_gather_rows(send, ghosts);
  }
  void end_gather() override {
    open_.end(OpenCall::Kind::Gather);
    halo_.wait(request_);
  }
  void begin_scatter_add(DenseView<T> dx) override {
    open_.begin(OpenCall::Kind::Scatter);
    request_ = halo_.start_scatter_add(dx);
  }
  void begin_scatter_rows(ConstDenseView<T> send, DenseView<T> received) override {
    open_.begin(OpenCall::Kind::Scatter);
    request_ = halo_.start_scatter_rows(send, received);
  }
  void end_scatter_add() override {
    open_.end(OpenCall::Kind::Scatter);
    halo_.wait(request_);
  }
  void progress() override { halo_.test(request_); }
  void set_idle_work(std::function<bool()> work) override { halo_.set_idle_work(std::move(work)); }
  HaloStats stats() const override { return halo_.stats(); }
  void reset_stats() override { halo_.reset_stats(); }
  std::size_t bytes() const override { return halo_.bytes(); }

private:
  HaloExchange<T> halo_;
  OpenCall open_;
  typename HaloExchange<T>::Request request_;
};

/// One direction of a stale exchange (PipeGCN): the rows sent in an epoch travel while the next
/// epoch computes, and are the rows it uses. The first exchange (and the first after a change of
/// width) waits for its own rows: exact.
template <typename T> class StaleRows {
public:
  /// gather: owner rows → ghost rows (else ghost shares → owners).
  StaleRows(std::shared_ptr<Communicator> comm, std::shared_ptr<const HaloPlan> plan,
            BackendPtr backend, int tag, bool gather, const ExchangeOptions& options)
      : backend_(backend), gather_(gather),
        out_rows_(gather ? plan->num_send_rows() : plan->n_ghost()),
        in_rows_(gather ? plan->n_ghost() : plan->num_send_rows()), smoothing_(options.smoothing),
        halo_(std::move(comm), std::move(plan), std::move(backend), tag) {
    halo_.set_precision(options.precision, options.seed);
  }

  /// `fill` writes this epoch's rows into the [out rows, width] view it is given; they are sent.
  /// Collective over the plan's ranks.
  template <typename Fill> void begin(std::int64_t width, Fill fill) {
    if (pending_.active()) halo_.wait(pending_); // last epoch's rows: they had an epoch to travel
    if (width != width_) primed_ = false;        // rows of another width: start over, exactly
    width_ = width;
    const DenseView<T> send = rows_in(send_, backend_, out_rows_, width);
    fill(send);
    const DenseView<T> now = rows_in(received_[current_], backend_, in_rows_, width);
    if (primed_) {
      current_ ^= 1;
      pending_ = start(send, rows_in(received_[current_], backend_, in_rows_, width));
    } else {
      auto request = start(send, now);
      halo_.wait(request);
    }
    rows_ = ConstDenseView<T>(now);
    if (smoothing_ > 0) {
      const DenseView<T> smoothed = rows_in(smoothed_, backend_, in_rows_, width);
      if (primed_) { // smoothed += (1 − s)·(received − smoothed); received is not read again
        ops::axpy(*backend_, T{-1}, std::span<const T>(flat(smoothed)), flat(now));
        ops::axpy(*backend_, static_cast<T>(1 - smoothing_), std::span<const T>(flat(now)),
                  flat(smoothed));
      } else {
        ops::copy(*backend_, ConstDenseView<T>(now), smoothed);
      }
      rows_ = ConstDenseView<T>(smoothed);
    }
    primed_ = true;
  }
  /// The rows to use now, [in rows, width]: those sent last epoch (smoothed when asked), valid
  /// until the next begin.
  ConstDenseView<T> end() const noexcept { return rows_; }

  void progress() { halo_.test(pending_); }
  void set_idle_work(std::function<bool()> work) { halo_.set_idle_work(std::move(work)); }
  const HaloStats& stats() const noexcept { return halo_.stats(); }
  void reset_stats() noexcept { halo_.reset_stats(); }
  std::size_t bytes() const noexcept {
    return halo_.bytes() + send_.bytes() + received_[0].bytes() + received_[1].bytes() +
           smoothed_.bytes();
  }

private:
  typename HaloExchange<T>::Request start(DenseView<T> send, DenseView<T> receive) {
    return gather_ ? halo_.start_gather_rows(ConstDenseView<T>(send), receive)
                   : halo_.start_scatter_rows(ConstDenseView<T>(send), receive);
  }
  static std::span<T> flat(DenseView<T> x) {
    return std::span<T>(x.data, static_cast<std::size_t>(x.size()));
  }

  BackendPtr backend_;
  bool gather_;
  std::int64_t out_rows_, in_rows_;
  double smoothing_;
  HaloExchange<T> halo_;
  Buffer<T> send_;         // [out rows, w]: the rows in flight
  Buffer<T> received_[2];  // [in rows, w]: last epoch's rows, and those in flight
  Buffer<T> smoothed_;     // [in rows, w]: the rows used, when smoothing
  ConstDenseView<T> rows_; // what end() gives
  int current_ = 0;        // received_[current_]: where the rows in flight land
  std::int64_t width_ = -1;
  bool primed_ = false;
  typename HaloExchange<T>::Request pending_; // destroyed first: its destructor waits
};

/// One direction of a skip exchange (Sancus): a message row is re-sent only when it drifted from
/// the copy its receiver holds by more than the threshold (relative, L2), or went unsent for
/// the bound of epochs; the receiver holds the rows it was last sent. Two messages per peer: a
/// bitmap of the rows re-sent, then those rows (compressed when asked). Rows are judged and
/// held on the host.
template <typename T> class SkipRows {
public:
  SkipRows(std::shared_ptr<Communicator> comm, std::shared_ptr<const HaloPlan> plan,
           BackendPtr backend, int tag, bool gather, const ExchangeOptions& options)
      : comm_(std::move(comm)), plan_(std::move(plan)), backend_(std::move(backend)), tag_(tag),
        out_blocks_(gather ? plan_->send_blocks() : plan_->recv_blocks()),
        in_blocks_(gather ? plan_->recv_blocks() : plan_->send_blocks()),
        out_rows_(gather ? plan_->num_send_rows() : plan_->n_ghost()),
        in_rows_(gather ? plan_->n_ghost() : plan_->num_send_rows()), options_(options) {}

  /// `fill` writes this epoch's rows into the [out rows, width] view it is given (backend
  /// memory); those that drifted are sent. Collective over the plan's ranks.
  template <typename Fill> void begin(std::int64_t width, Fill fill) {
    const Stopwatch clock;
    const DenseView<T> send = rows_in(send_, backend_, out_rows_, width);
    fill(send);
    const std::int64_t w = width;
    const bool first = w != width_;
    width_ = w;
    const auto row_values = static_cast<std::size_t>(w);
    const T* rows = send.data;
    if (backend_->kind() != DeviceKind::Cpu) {
      current_.resize(static_cast<std::size_t>(out_rows_) * row_values);
      backend_->copy_to_host(current_.data(), send.data, current_.size() * sizeof(T));
      rows = current_.data();
    }
    if (first) {
      last_.assign(static_cast<std::size_t>(out_rows_) * row_values, T{0});
      age_.assign(static_cast<std::size_t>(out_rows_), 0);
      held_.assign(static_cast<std::size_t>(in_rows_) * row_values, T{0});
    }
    // 1. Which rows go: a bitmap per peer, exchanged first (the receivers size the rows by it).
    goes_.assign(static_cast<std::size_t>(out_rows_), 0);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < out_rows_; ++i) {
      int& age = age_[static_cast<std::size_t>(i)];
      if (first || ++age >= options_.skip_max_age ||
          drifted(rows + i * w, last_.data() + i * w, w)) {
        goes_[static_cast<std::size_t>(i)] = 1;
        age = 0;
      }
    }
    out_bits_.assign(bitmap_bytes(out_blocks_), std::byte{0});
    chosen_.clear();
    std::size_t bit_offset = 0;
    for (const HaloPlan::Block& b : out_blocks_) {
      for (std::int64_t k = 0; k < b.count; ++k) {
        if (goes_[static_cast<std::size_t>(b.begin + k)] == 0) continue;
        out_bits_[bit_offset + static_cast<std::size_t>(k / 8)] |= std::byte{1} << (k % 8);
        chosen_.push_back(b.begin + k);
      }
      bit_offset += static_cast<std::size_t>((b.count + 7) / 8);
    }
    in_bits_.assign(bitmap_bytes(in_blocks_), std::byte{0});
    finish(*comm_->start_exchange(bitmap_sends(), bitmap_recvs(), tag_));

    // 2. The chosen rows, encoded; the senders keep what the receivers will hold.
    const std::size_t row_bytes = encoded_row_bytes(options_.precision, w, sizeof(T));
    picked_.resize(chosen_.size() * row_values);
    const auto n_chosen = static_cast<std::int64_t>(chosen_.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t j = 0; j < n_chosen; ++j)
      std::copy_n(rows + chosen_[j] * w, row_values, picked_.data() + j * w);
    const ConstDenseView<T> picked(picked_.data(), static_cast<std::int64_t>(chosen_.size()), w);
    // fp32 rows travel as they are; compressed ones are encoded, and decoded back here.
    std::span<const std::byte> out_code = std::as_bytes(std::span<const T>(picked_));
    if (encoded()) {
      out_code_.resize(chosen_.size() * row_bytes);
      const RngKey key =
          RngKey::make(options_.seed, RngPurpose::HaloRounding, static_cast<std::uint32_t>(tag_),
                       static_cast<std::uint32_t>(exchanges_++));
      encode_rows(options_.precision, picked, std::span<std::byte>(out_code_), key,
                  static_cast<std::int64_t>(comm_->rank()) << 32);
      decode_rows(options_.precision, std::span<const std::byte>(out_code_),
                  DenseView<T>(picked_.data(), picked.rows, w));
      out_code = out_code_;
    }
#pragma omp parallel for schedule(static)
    for (std::int64_t j = 0; j < n_chosen; ++j)
      std::copy_n(picked_.data() + j * w, row_values, last_.data() + chosen_[j] * w);
    std::vector<SendMessage> sends;
    std::size_t at = 0;
    bit_offset = 0;
    for (const HaloPlan::Block& b : out_blocks_) {
      const std::size_t n = count_bits(out_bits_, bit_offset, b.count);
      sends.push_back({b.peer, out_code.subspan(at, n * row_bytes)});
      at += n * row_bytes;
      bit_offset += static_cast<std::size_t>((b.count + 7) / 8);
    }
    std::size_t incoming = 0;
    bit_offset = 0;
    for (const HaloPlan::Block& b : in_blocks_) {
      incoming += count_bits(in_bits_, bit_offset, b.count);
      bit_offset += static_cast<std::size_t>((b.count + 7) / 8);
    }
    in_code_.resize(incoming * row_bytes);
    std::vector<RecvMessage> recvs;
    at = 0;
    bit_offset = 0;
    for (const HaloPlan::Block& b : in_blocks_) {
      const std::size_t n = count_bits(in_bits_, bit_offset, b.count);
      recvs.push_back({b.peer, std::span<std::byte>(in_code_).subspan(at, n * row_bytes)});
      at += n * row_bytes;
      bit_offset += static_cast<std::size_t>((b.count + 7) / 8);
    }
    pending_ = comm_->start_exchange(sends, recvs, tag_);
    ++stats_.exchanges;
    stats_.bytes_sent += static_cast<std::int64_t>(out_bits_.size() + out_code.size());
    stats_.bytes_received += static_cast<std::int64_t>(in_bits_.size() + in_code_.size());
    stats_.start_seconds += clock.seconds();
  }

  /// Waits for the rows re-sent and returns every row as now held, [in rows, w] in backend
  /// memory (valid until the next call).
  ConstDenseView<T> end() {
    const Stopwatch clock;
    if (pending_ == nullptr) throw InvalidArgument("skip exchange: end without begin");
    finish(*pending_);
    pending_.reset();
    const std::int64_t w = width_;
    const auto row_values = static_cast<std::size_t>(w);
    const auto arrived = static_cast<std::int64_t>(
        in_code_.size() / encoded_row_bytes(options_.precision, w, sizeof(T)));
    std::span<const std::byte> rows = in_code_; // fp32: the rows as they were sent
    if (encoded()) {
      picked_.resize(static_cast<std::size_t>(arrived) * row_values);
      decode_rows(options_.precision, std::span<const std::byte>(in_code_),
                  DenseView<T>(picked_.data(), arrived, w));
      rows = std::as_bytes(std::span<const T>(picked_));
    }
    const std::size_t row_size = row_values * sizeof(T);
    std::size_t j = 0, bit_offset = 0;
    for (const HaloPlan::Block& b : in_blocks_) {
      for (std::int64_t k = 0; k < b.count; ++k) {
        if ((in_bits_[bit_offset + static_cast<std::size_t>(k / 8)] & (std::byte{1} << (k % 8))) ==
            std::byte{0}) {
          continue;
        }
        std::memcpy(held_.data() + (b.begin + k) * w, rows.data() + j * row_size, row_size);
        ++j;
      }
      bit_offset += static_cast<std::size_t>((b.count + 7) / 8);
    }
    ConstDenseView<T> held(held_.data(), in_rows_, w);
    if (backend_->kind() != DeviceKind::Cpu) {
      const DenseView<T> device = rows_in(held_device_, backend_, in_rows_, w);
      backend_->copy_from_host(device.data, held_.data(), held_.size() * sizeof(T));
      held = ConstDenseView<T>(device);
    }
    stats_.wait_seconds += clock.seconds();
    return held;
  }

  void progress() {
    if (pending_ != nullptr) pending_->test();
  }
  void set_idle_work(std::function<bool()> work) {
    idle_work_ = std::move(work);
  }
  const HaloStats& stats() const noexcept {
    return stats_;
  }
  void reset_stats() noexcept {
    stats_ = {};
  }
  std::size_t bytes() const noexcept {
    return (current_.size() + last_.size() + held_.size() + picked_.size()) * sizeof(T) +
           out_code_.size() + in_code_.size() + send_.bytes() + held_device_.bytes();
  }

private:
  bool encoded() const noexcept {
    return options_.precision != HaloPrecision::Fp32;
  }
  /// Waits for `messages`, doing the idle work while they are in flight.
  void finish(Pending& messages) {
    if (idle_work_) {
      while (!messages.test() && idle_work_()) {
      }
    }
    messages.wait();
  }
  /// ‖x − last‖ > τ·‖last‖ (a row with a non-finite value always drifted).
  bool drifted(const T* x, const T* last, std::int64_t w) const {
    double change = 0.0, size = 0.0;
    for (std::int64_t j = 0; j < w; ++j) {
      const double d = static_cast<double>(x[j]) - static_cast<double>(last[j]);
      change += d * d;
      size += static_cast<double>(last[j]) * static_cast<double>(last[j]);
    }
    const double tau = options_.skip_threshold;
    return !(change <= tau * tau * size);
  }
  static std::size_t bitmap_bytes(const std::vector<HaloPlan::Block>& blocks) {
    std::size_t bytes = 0;
    for (const HaloPlan::Block& b : blocks)
      bytes += static_cast<std::size_t>((b.count + 7) / 8);
    return bytes;
  }
  static std::size_t count_bits(const std::vector<std::byte>& bits, std::size_t offset,
                                std::int64_t count) {
    std::size_t n = 0;
    for (std::int64_t k = 0; k < count; ++k) {
      n += (bits[offset + static_cast<std::size_t>(k / 8)] & (std::byte{1} << (k % 8))) !=
           std::byte{0};
    }
    return n;
  }
  std::vector<SendMessage> bitmap_sends() const {
    std::vector<SendMessage> sends;
    std::size_t at = 0;
    for (const HaloPlan::Block& b : out_blocks_) {
      const auto n = static_cast<std::size_t>((b.count + 7) / 8);
      sends.push_back({b.peer, std::span<const std::byte>(out_bits_).subspan(at, n)});
      at += n;
    }
    return sends;
  }
  std::vector<RecvMessage> bitmap_recvs() {
    std::vector<RecvMessage> recvs;
    std::size_t at = 0;
    for (const HaloPlan::Block& b : in_blocks_) {
      const auto n = static_cast<std::size_t>((b.count + 7) / 8);
      recvs.push_back({b.peer, std::span<std::byte>(in_bits_).subspan(at, n)});
      at += n;
    }
    return recvs;
  }

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<const HaloPlan> plan_;
  BackendPtr backend_;
  int tag_;
  const std::vector<HaloPlan::Block>& out_blocks_; // the plan's: it outlives this object
  const std::vector<HaloPlan::Block>& in_blocks_;
  std::int64_t out_rows_, in_rows_;
  ExchangeOptions options_;
  std::int64_t width_ = -1;
  std::vector<T> current_;           // [out rows, w]: device rows copied to the host
  std::vector<T> last_;              // [out rows, w]: what each receiver holds of each row
  std::vector<int> age_;             // [out rows]: epochs since each row was last sent
  std::vector<T> held_;              // [in rows, w]: the rows last received
  std::vector<T> picked_;            // [chosen rows, w]: rows to send (or encode), rows decoded
  std::vector<char> goes_;           // [out rows]: whether each row is re-sent this time
  std::vector<std::int64_t> chosen_; // the out rows re-sent this time, in block order
  std::vector<std::byte> out_bits_, in_bits_;
  std::vector<std::byte> out_code_; // the chosen rows encoded (compressed precisions only)
  std::vector<std::byte> in_code_;  // the rows received, as they travel
  Buffer<T> send_;        // [out rows, w]: this epoch's rows, in backend memory
  Buffer<T> held_device_; // held_ in device memory
  std::uint64_t exchanges_ = 0;
  HaloStats stats_;
  std::function<bool()> idle_work_;  // what waits do while messages fly
  std::unique_ptr<Pending> pending_; // destroyed first: its destructor waits
};

/// Stale or skip: training passes through a channel per direction (`Rows`: StaleRows or
/// SkipRows, each `begin(width, fill)` then `end()` giving the rows to use); evaluation passes
/// exact, through an exchange of their own that also packs rows and adds shares for the
/// channels.
template <typename T, template <typename> class Rows>
class ChannelExchange final : public LayerExchange<T> {
public:
  ChannelExchange(std::shared_ptr<Communicator> comm, std::shared_ptr<const HaloPlan> plan,
                  BackendPtr backend, int layer, const ExchangeOptions& options)
      : LayerExchange<T>(plan, backend, options),
        forward_(comm, plan, backend, tags::layer(layer, tags::Channel::Forward), true, options),
        backward_(comm, plan, backend, tags::layer(layer, tags::Channel::Backward), false, options),
        exact_(std::move(comm), plan, backend, tags::layer(layer, tags::Channel::Evaluation)) {
    exact_.set_precision(options.precision, options.seed);
  }

  void begin_gather(DenseView<T> x, Pass pass) override {
    open_.begin(OpenCall::Kind::Gather);
    if (pass == Pass::Evaluation) {
      request_ = exact_.start_gather(x);
      return;
    }
    forward_.begin(x.cols, [&](DenseView<T> send) { exact_.pack(ConstDenseView<T>(x), send); });
    target_ = ghost_rows(this->plan(), x);
  }
  void begin_gather_rows(ConstDenseView<T> send, DenseView<T> ghosts, Pass pass) override {
    open_.begin(OpenCall::Kind::Gather);
    if (pass == Pass::Evaluation) {
      request_ = exact_.start_gather_rows(send, ghosts);
      return;
    }
    forward_.begin(send.cols, [&](DenseView<T> out) { copy(send, out); });
    target_ = ghosts;
  }
  void end_gather() override {
    open_.end(OpenCall::Kind::Gather);
    if (request_.active()) {
      exact_.wait(request_);
      return;
    }
    copy(forward_.end(), target_);
  }
  void begin_scatter_add(DenseView<T> dx) override {
    open_.begin(OpenCall::Kind::Scatter);
    backward_.begin(dx.cols, [&](DenseView<T> out) {
      copy(ConstDenseView<T>(ghost_rows(this->plan(), dx)), out);
    });
    target_ = dx;
    adds_ = true;
  }
  void begin_scatter_rows(ConstDenseView<T> send, DenseView<T> received) override {
    open_.begin(OpenCall::Kind::Scatter);
    backward_.begin(send.cols, [&](DenseView<T> out) { copy(send, out); });
    target_ = received;
    adds_ = false;
  }
  void end_scatter_add() override {
    open_.end(OpenCall::Kind::Scatter);
    if (adds_) {
      exact_.add_shares(backward_.end(), target_);
    } else {
      copy(backward_.end(), target_);
    }
  }
  void progress() override {
    exact_.test(request_);
    forward_.progress();
    backward_.progress();
  }
  void set_idle_work(std::function<bool()> work) override {
    forward_.set_idle_work(work);
    backward_.set_idle_work(work);
    exact_.set_idle_work(std::move(work));
  }
  HaloStats stats() const override {
    HaloStats sum = forward_.stats();
    sum += backward_.stats();
    sum += exact_.stats();
    return sum;
  }
  void reset_stats() override {
    forward_.reset_stats();
    backward_.reset_stats();
    exact_.reset_stats();
  }
  std::size_t bytes() const override {
    return forward_.bytes() + backward_.bytes() + exact_.bytes();
  }

private:
  void copy(ConstDenseView<T> from, DenseView<T> to) { ops::copy(*this->backend(), from, to); }

  Rows<T> forward_, backward_;
  HaloExchange<T> exact_; // evaluation passes; packs and adds rows for the channels
  OpenCall open_;
  typename HaloExchange<T>::Request request_; // an evaluation's gather
  DenseView<T> target_; // where end puts the rows: ghost rows, dx or the received shares
  bool adds_ = false;   // a scatter-add adds its shares into target_ (else copies them there)
};

} // namespace

template <typename T>
std::unique_ptr<LayerExchange<T>>
make_layer_exchange(std::shared_ptr<Communicator> comm, std::shared_ptr<const HaloPlan> plan,
                    BackendPtr backend, int layer, const ExchangeOptions& options) {
  options.validate();
  switch (options.mode) {
  case HaloMode::Stale:
    return std::make_unique<ChannelExchange<T, StaleRows>>(std::move(comm), std::move(plan),
                                                           std::move(backend), layer, options);
  case HaloMode::Skip:
    return std::make_unique<ChannelExchange<T, SkipRows>>(std::move(comm), std::move(plan),
                                                          std::move(backend), layer, options);
  case HaloMode::Exact:
    break;
  }
  return std::make_unique<ExactExchange<T>>(std::move(comm), std::move(plan), std::move(backend),
                                            layer, options);
}

template std::unique_ptr<LayerExchange<float>> make_layer_exchange(std::shared_ptr<Communicator>,
                                                                   std::shared_ptr<const HaloPlan>,
                                                                   BackendPtr, int,
                                                                   const ExchangeOptions&);
template std::unique_ptr<LayerExchange<double>> make_layer_exchange(std::shared_ptr<Communicator>,
                                                                    std::shared_ptr<const HaloPlan>,
                                                                    BackendPtr, int,
                                                                    const ExchangeOptions&);

} // namespace tessera::comm
