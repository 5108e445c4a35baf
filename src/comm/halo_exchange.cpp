// Halo gather and scatter-add: pack, post, and (for scatter-add) unpack-add on wait.
#include "tessera/comm/halo_exchange.hpp"

#include "tessera/comm/tags.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/ops/ops.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <fmt/core.h>
#include <limits>
#include <vector>

namespace tessera::comm {

std::string to_string(HaloPrecision precision) {
  switch (precision) {
  case HaloPrecision::Fp32:
    return "fp32";
  case HaloPrecision::Bf16:
    return "bf16";
  case HaloPrecision::Int8:
    return "int8";
  }
  return "?";
}

HaloPrecision parse_halo_precision(const std::string& text) {
  for (const HaloPrecision p : {HaloPrecision::Fp32, HaloPrecision::Bf16, HaloPrecision::Int8}) {
    if (text == to_string(p)) return p;
  }
  throw InvalidArgument("halo precision '" + text + "': expects fp32, bf16 or int8");
}

std::size_t encoded_row_bytes(HaloPrecision precision, std::int64_t width,
                              std::size_t value_bytes) {
  const auto w = static_cast<std::size_t>(width);
  switch (precision) {
  case HaloPrecision::Bf16:
    return 2 * w;
  case HaloPrecision::Int8:
    return sizeof(float) + w; // the row's scale, then its values
  case HaloPrecision::Fp32:
    break;
  }
  return value_bytes * w;
}

template <typename T>
void encode_rows(HaloPrecision precision, ConstDenseView<T> rows, std::span<std::byte> out,
                 const RngKey& key, std::int64_t row_key) {
  const std::size_t row_bytes = encoded_row_bytes(precision, rows.cols, sizeof(T));
  if (out.size() != static_cast<std::size_t>(rows.rows) * row_bytes) {
    throw DimensionMismatch(fmt::format("encode_rows: {} rows of {} need {} bytes, got {}",
                                        rows.rows, rows.cols, rows.rows * row_bytes, out.size()));
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < rows.rows; ++i) {
    const T* row = rows.data + i * rows.cols;
    std::byte* code = out.data() + static_cast<std::size_t>(i) * row_bytes;
    if (precision == HaloPrecision::Fp32) {
      std::memcpy(code, row, row_bytes);
    } else if (precision == HaloPrecision::Bf16) {
      for (std::int64_t j = 0; j < rows.cols; ++j) {
        const std::uint16_t half = to_bf16(static_cast<float>(row[j])).bits;
        std::memcpy(code + 2 * j, &half, sizeof(half));
      }
    } else {
      float largest = 0; // over the finite values: a non-finite one travels as 0
      for (std::int64_t j = 0; j < rows.cols; ++j) {
        const float a = std::abs(static_cast<float>(row[j]));
        if (std::isfinite(a) && a > largest) largest = a;
      }
      const float scale = largest / 127.0f;
      std::memcpy(code, &scale, sizeof(scale));
      auto* q = reinterpret_cast<std::int8_t*>(code + sizeof(scale));
      // Eight random bits a value (a step's rounding is unbiased to 1/512 of it): one Philox
      // draw of four words rounds sixteen columns, in a loop the compiler vectorizes.
      const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
      for (std::int64_t j0 = 0; j0 < rows.cols; j0 += 16) {
        const std::array<std::uint32_t, 4> bits =
            random_bits4(key, row_key + i, static_cast<std::uint32_t>(j0 / 16));
        float u[16]; // column j0 + k: byte k % 4 of word k / 4
        for (int k = 0; k < 16; ++k)
          u[k] = (static_cast<float>((bits[k / 4] >> (8 * (k % 4))) & 0xFFu) + 0.5f) / 256.0f;
        const std::int64_t n = std::min<std::int64_t>(16, rows.cols - j0);
        for (std::int64_t k = 0; k < n; ++k) {
          const float rounded = std::floor(static_cast<float>(row[j0 + k]) * inverse + u[k]);
          const float clamped = std::min(std::max(rounded, -127.0f), 127.0f);
          // A non-finite value (inf, NaN) travels as 0.
          q[j0 + k] = std::abs(rounded) <= std::numeric_limits<float>::max()
                          ? static_cast<std::int8_t>(clamped)
                          : std::int8_t{0};
        }
      }
    }
  }
}

template <typename T>
void decode_rows(HaloPrecision precision, std::span<const std::byte> in, DenseView<T> rows) {
  const std::size_t row_bytes = encoded_row_bytes(precision, rows.cols, sizeof(T));
  if (in.size() != static_cast<std::size_t>(rows.rows) * row_bytes) {
    throw DimensionMismatch(fmt::format("decode_rows: {} rows of {} need {} bytes, got {}",
                                        rows.rows, rows.cols, rows.rows * row_bytes, in.size()));
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < rows.rows; ++i) {
    T* row = rows.data + i * rows.cols;
    const std::byte* code = in.data() + static_cast<std::size_t>(i) * row_bytes;
    if (precision == HaloPrecision::Fp32) {
      std::memcpy(row, code, row_bytes);
    } else if (precision == HaloPrecision::Bf16) {
      for (std::int64_t j = 0; j < rows.cols; ++j) {
        std::uint16_t half = 0;
        std::memcpy(&half, code + 2 * j, sizeof(half));
        row[j] = static_cast<T>(to_float(Bf16{half}));
      }
    } else {
      float scale = 0;
      std::memcpy(&scale, code, sizeof(scale));
      const auto* q = reinterpret_cast<const std::int8_t*>(code + sizeof(scale));
      for (std::int64_t j = 0; j < rows.cols; ++j)
        row[j] = static_cast<T>(static_cast<float>(q[j]) * scale);
    }
  }
}

template void encode_rows(HaloPrecision, ConstDenseView<float>, std::span<std::byte>, const RngKey&,
                          std::int64_t);
template void encode_rows(HaloPrecision, ConstDenseView<double>, std::span<std::byte>,
                          const RngKey&, std::int64_t);
template void decode_rows(HaloPrecision, std::span<const std::byte>, DenseView<float>);
template void decode_rows(HaloPrecision, std::span<const std::byte>, DenseView<double>);

namespace {

/// A view's elements as bytes (its rows are contiguous).
template <typename T> std::span<const std::byte> bytes_of(ConstDenseView<T> x) {
  return std::as_bytes(std::span<const T>(x.data, static_cast<std::size_t>(x.size())));
}
template <typename T> std::span<std::byte> bytes_of(DenseView<T> x) {
  return std::as_writable_bytes(std::span<T>(x.data, static_cast<std::size_t>(x.size())));
}

} // namespace

template <typename T>
HaloExchange<T>::HaloExchange(std::shared_ptr<Communicator> comm,
                              std::shared_ptr<const HaloPlan> plan, BackendPtr backend, int tag)
    : comm_(std::move(comm)), plan_(std::move(plan)), backend_(std::move(backend)), tag_(tag) {
  const std::vector<LocalId>& rows = plan_->send_rows();
  send_rows_ = Buffer<LocalId>(backend_, static_cast<std::int64_t>(rows.size()));
  backend_->copy_from_host(send_rows_.data(), rows.data(), rows.size() * sizeof(LocalId));
  staged_ = backend_->kind() != DeviceKind::Cpu && !comm_->accepts_device_memory();
}

template <typename T> HaloExchange<T>::~HaloExchange() {
  if (recv_copy_ == nullptr) return;
  try {
    recv_copy_->synchronize();
  } catch (...) {
    // A failed copy has no one left to tell; the buffer is freed either way.
  }
}

template <typename T>
void HaloExchange<T>::set_precision(HaloPrecision precision, std::uint64_t seed) {
  precision_ = precision;
  seed_ = seed;
  // Rows are encoded and decoded on the host: device rows go through the staging buffers.
  if (precision != HaloPrecision::Fp32 && backend_->kind() != DeviceKind::Cpu) staged_ = true;
}

template <typename T>
void HaloExchange<T>::prepare_stages(std::size_t send_bytes, std::size_t recv_bytes) {
  if (recv_copy_ != nullptr) { // messages are about to land where that copy reads
    recv_copy_->synchronize();
    recv_copy_.reset();
  }
  if (send_stage_.size() < send_bytes) send_stage_ = PinnedBuffer(backend_, send_bytes);
  if (recv_stage_.size() < recv_bytes) recv_stage_ = PinnedBuffer(backend_, recv_bytes);
}

template <typename T>
void HaloExchange<T>::check_shape(const char* what, ConstDenseView<T> x) const {
  if (x.rows != plan_->n_local()) {
    throw DimensionMismatch(fmt::format("halo {} on rank {}: matrix {} has {} rows, the plan "
                                        "{} ({} owned + {} ghost)",
                                        what, comm_->rank(), shape_string(x.rows, x.cols), x.rows,
                                        plan_->n_local(), plan_->n_owned(), plan_->n_ghost()));
  }
}

template <typename T>
void HaloExchange<T>::check_rows(const char* what, ConstDenseView<T> send, std::int64_t send_rows,
                                 DenseView<T> receive, std::int64_t receive_rows) const {
  if (send.rows != send_rows || receive.rows != receive_rows || send.cols != receive.cols) {
    throw DimensionMismatch(fmt::format("halo {} on rank {}: sending {} and receiving {}, the "
                                        "plan sends {} rows and receives {}",
                                        what, comm_->rank(), shape_string(send.rows, send.cols),
                                        shape_string(receive.rows, receive.cols), send_rows,
                                        receive_rows));
  }
}

template <typename T>
void HaloExchange<T>::check_send_rows(const char* what, ConstDenseView<T> rows,
                                      std::int64_t width) const {
  if (rows.rows != plan_->num_send_rows() || rows.cols != width) {
    throw DimensionMismatch(fmt::format("halo {} rows on rank {}: {} should be {}", what,
                                        comm_->rank(), shape_string(rows.rows, rows.cols),
                                        shape_string(plan_->num_send_rows(), width)));
  }
}

template <typename T> DenseView<T> HaloExchange<T>::buffer(std::int64_t width) {
  const std::int64_t size = plan_->num_send_rows() * width;
  if (buffer_.size() < size) buffer_ = Buffer<T>(backend_, size);
  return DenseView<T>(buffer_.data(), plan_->num_send_rows(), width);
}

template <typename T>
typename HaloExchange<T>::Request
HaloExchange<T>::post(typename Request::Kind kind, DenseView<T> x, ConstDenseView<T> out,
                      const std::vector<HaloPlan::Block>& out_blocks, DenseView<T> in,
                      const std::vector<HaloPlan::Block>& in_blocks, const Stopwatch& clock) {
  const std::int64_t w = x.cols;
  std::size_t sent = static_cast<std::size_t>(out.size()) * sizeof(T);
  std::size_t received = static_cast<std::size_t>(in.size()) * sizeof(T);
  // The rows as the host sees them: device rows through the staging buffers (`in` is filled from
  // the receive stage at wait()).
  ConstDenseView<T> host_out = out;
  DenseView<T> host_in = in;
  if (staged_) {
    prepare_stages(sent, received);
    // The communicator (or the encoder) reads the send stage at once: the host waits for this
    // copy (on the copy stream, after the kernels that wrote `out`).
    backend_->copy_async(send_stage_.data(), out.data, sent, CopyDirection::DeviceToHost)
        ->synchronize();
    host_out = ConstDenseView<T>(reinterpret_cast<const T*>(send_stage_.data()), out.rows, w);
    host_in = DenseView<T>(reinterpret_cast<T*>(recv_stage_.data()), in.rows, w);
  }
  // What travels: the rows themselves, or their encoding (decoded into host_in at wait()).
  std::span<const std::byte> out_bytes = bytes_of(host_out);
  std::span<std::byte> in_bytes = bytes_of(host_in);
  std::size_t row = static_cast<std::size_t>(w) * sizeof(T);
  if (precision_ != HaloPrecision::Fp32) {
    row = encoded_row_bytes(precision_, w, sizeof(T));
    send_code_.resize(static_cast<std::size_t>(out.rows) * row);
    recv_code_.resize(static_cast<std::size_t>(in.rows) * row);
    // A fresh rounding field per exchange, per rank (rows of a rank are keyed above 2^32 · rank).
    const RngKey key =
        RngKey::make(seed_, RngPurpose::HaloRounding, static_cast<std::uint32_t>(tag_),
                     static_cast<std::uint32_t>(encoded_++));
    encode_rows(precision_, host_out, std::span<std::byte>(send_code_), key,
                static_cast<std::int64_t>(comm_->rank()) << 32);
    out_bytes = send_code_;
    in_bytes = recv_code_;
    sent = send_code_.size();
    received = recv_code_.size();
  }
  const auto block_of = [row](auto bytes, const HaloPlan::Block& b) {
    return bytes.subspan(static_cast<std::size_t>(b.begin) * row,
                         static_cast<std::size_t>(b.count) * row);
  };
  std::vector<SendMessage> sends;
  std::vector<RecvMessage> recvs;
  for (const HaloPlan::Block& b : out_blocks)
    sends.push_back({b.peer, block_of(out_bytes, b)});
  for (const HaloPlan::Block& b : in_blocks)
    recvs.push_back({b.peer, block_of(in_bytes, b)});
  Request request;
  request.kind_ = kind;
  request.x_ = x;
  request.in_ = in;
  request.pending_ = comm_->start_exchange(sends, recvs, tag_);
  ++stats_.exchanges;
  stats_.bytes_sent += static_cast<std::int64_t>(sent);
  stats_.bytes_received += static_cast<std::int64_t>(received);
  stats_.start_seconds += clock.seconds();
  return request;
}

template <typename T>
typename HaloExchange<T>::Request HaloExchange<T>::start_gather(DenseView<T> x) {
  check_shape("gather", ConstDenseView<T>(x));
  const Stopwatch clock;
  DenseView<T> packed = buffer(x.cols); // [num_send_rows, w]: our rows the peers read
  pack(ConstDenseView<T>(x), packed);
  return post(Request::Kind::Gather, x, ConstDenseView<T>(packed), plan_->send_blocks(),
              x.slice_rows(plan_->n_owned(), plan_->n_local()), plan_->recv_blocks(), clock);
}

template <typename T>
typename HaloExchange<T>::Request HaloExchange<T>::start_scatter_add(DenseView<T> dx) {
  check_shape("scatter-add", ConstDenseView<T>(dx));
  const Stopwatch clock;
  DenseView<T> received = buffer(dx.cols); // [num_send_rows, w]: the peers' shares of our rows
  return post(Request::Kind::ScatterAdd, dx,
              ConstDenseView<T>(dx.slice_rows(plan_->n_owned(), plan_->n_local())),
              plan_->recv_blocks(), received, plan_->send_blocks(), clock);
}

template <typename T>
typename HaloExchange<T>::Request HaloExchange<T>::start_gather_rows(ConstDenseView<T> send,
                                                                     DenseView<T> receive) {
  check_rows("gather", send, plan_->num_send_rows(), receive, plan_->n_ghost());
  const Stopwatch clock;
  return post(Request::Kind::Rows, receive, send, plan_->send_blocks(), receive,
              plan_->recv_blocks(), clock);
}

template <typename T>
typename HaloExchange<T>::Request HaloExchange<T>::start_scatter_rows(ConstDenseView<T> send,
                                                                      DenseView<T> receive) {
  check_rows("scatter-add", send, plan_->n_ghost(), receive, plan_->num_send_rows());
  const Stopwatch clock;
  return post(Request::Kind::Rows, receive, send, plan_->recv_blocks(), receive,
              plan_->send_blocks(), clock);
}

template <typename T> void HaloExchange<T>::wait(Request& request) {
  if (!request.active()) throw InvalidArgument("HaloExchange::wait on a request not started");
  const Stopwatch clock;
  if (idle_work_) {
    while (!request.pending_->test() && idle_work_()) {
    }
  }
  request.pending_->wait();
  request.pending_.reset();
  const std::int64_t w = request.x_.cols;
  if (precision_ != HaloPrecision::Fp32) { // into the stage (then on to the device) or in place
    decode_rows(precision_, std::span<const std::byte>(recv_code_),
                staged_
                    ? DenseView<T>(reinterpret_cast<T*>(recv_stage_.data()), request.in_.rows, w)
                    : request.in_);
  }
  if (staged_) {
    // To the device on the copy stream; the kernels queued from now on (the scatter-add below,
    // the caller's aggregation) wait for it there, the host does not. The next exchange waits
    // for it before receiving into the stage again.
    recv_copy_ = backend_->copy_async(request.in_.data, recv_stage_.data(),
                                      static_cast<std::size_t>(request.in_.size()) * sizeof(T),
                                      CopyDirection::HostToDevice);
    backend_->wait(Stream::Compute, *recv_copy_);
  }
  if (request.kind_ == Request::Kind::ScatterAdd) {
    add_shares(ConstDenseView<T>(buffer(w)), request.x_);
  }
  stats_.wait_seconds += clock.seconds();
}

template <typename T> bool HaloExchange<T>::test(Request& request) {
  return !request.active() || request.pending_->test();
}

template <typename T> void HaloExchange<T>::pack(ConstDenseView<T> x, DenseView<T> packed) {
  check_shape("pack", x);
  check_send_rows("pack into", packed, x.cols);
  ops::gather_rows(*backend_, x, send_rows_.span(), packed);
}

template <typename T>
void HaloExchange<T>::add_shares(ConstDenseView<T> received, DenseView<T> dx) {
  check_shape("scatter-add", ConstDenseView<T>(dx));
  check_send_rows("scatter-add of", received, dx.cols);
  // A row read by several peers appears once per peer block: add block by block (rows are
  // distinct within a block), in rank order.
  const std::span<const LocalId> rows = send_rows_.span();
  for (const HaloPlan::Block& b : plan_->send_blocks()) {
    const ConstDenseView<T> block(received.data + b.begin * received.cols, b.count, received.cols);
    ops::scatter_add_rows(
        *backend_, block,
        rows.subspan(static_cast<std::size_t>(b.begin), static_cast<std::size_t>(b.count)), dx);
  }
}

template <typename T> void HaloExchange<T>::gather(DenseView<T> x) {
  Request request = start_gather(x);
  wait(request);
}

template <typename T> void HaloExchange<T>::scatter_add(DenseView<T> dx) {
  Request request = start_scatter_add(dx);
  wait(request);
}

namespace {

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& v, std::int64_t begin,
                                    std::int64_t count) {
  return std::as_bytes(std::span<const T>(v).subspan(static_cast<std::size_t>(begin),
                                                     static_cast<std::size_t>(count)));
}

template <typename T>
std::span<std::byte> bytes_of(T* data, std::int64_t begin, std::int64_t count) {
  return std::as_writable_bytes(std::span<T>(data + begin, static_cast<std::size_t>(count)));
}

} // namespace

Csr gather_sparse_rows(Communicator& comm, const HaloPlan& plan, const Csr& owned,
                       HaloStats* stats) {
  if (owned.rows() > 0 && owned.backend()->kind() != DeviceKind::Cpu) {
    throw InvalidArgument(fmt::format("gather_sparse_rows on rank {}: the matrix must be in host "
                                      "memory (copy it to the device after the gather)",
                                      comm.rank()));
  }
  if (owned.rows() != plan.n_owned()) {
    throw DimensionMismatch(
        fmt::format("gather_sparse_rows on rank {}: matrix {} for {} owned rows", comm.rank(),
                    owned.shape(), plan.n_owned()));
  }
  const std::int64_t n_owned = plan.n_owned();
  // 1. Row lengths of the rows each peer reads, and of our ghost rows.
  std::vector<Offset> send_length(static_cast<std::size_t>(plan.num_send_rows()));
  for (std::size_t i = 0; i < send_length.size(); ++i) {
    const LocalId r = plan.send_rows()[i];
    send_length[i] = owned.row_ptr()[r + 1] - owned.row_ptr()[r];
  }
  std::vector<Offset> ghost_length(static_cast<std::size_t>(plan.n_ghost()));
  {
    std::vector<SendMessage> sends;
    std::vector<RecvMessage> recvs;
    for (const HaloPlan::Block& b : plan.send_blocks())
      sends.push_back({b.peer, bytes_of(send_length, b.begin, b.count)});
    for (const HaloPlan::Block& b : plan.recv_blocks())
      recvs.push_back({b.peer, bytes_of(ghost_length.data(), b.begin, b.count)});
    comm.start_exchange(sends, recvs, tags::kSparseRowCounts)->wait();
  }

  // 2. The local matrix: owned rows copied, ghost rows' space reserved from their lengths.
  const Offset owned_nnz = owned.nnz();
  Offset ghost_nnz = 0;
  for (const Offset length : ghost_length)
    ghost_nnz += length;
  Csr local(owned.backend(), plan.n_local(), owned.cols(), owned_nnz + ghost_nnz);
  std::copy_n(owned.row_ptr(), n_owned + 1, local.row_ptr());
  std::copy_n(owned.col(), owned_nnz, local.col());
  std::copy_n(owned.val(), owned_nnz, local.val());
  for (std::int64_t g = 0; g < plan.n_ghost(); ++g)
    local.row_ptr()[n_owned + g + 1] = local.row_ptr()[n_owned + g] + ghost_length[g];

  // 3. Columns and values of the rows each peer reads, packed per block.
  std::vector<LocalId> send_col;
  std::vector<float> send_val;
  std::vector<std::int64_t> block_begin; // per send block, offset into send_col
  for (const HaloPlan::Block& b : plan.send_blocks()) {
    block_begin.push_back(static_cast<std::int64_t>(send_col.size()));
    for (std::int64_t i = b.begin; i < b.begin + b.count; ++i) {
      const LocalId r = plan.send_rows()[i];
      send_col.insert(send_col.end(), owned.col() + owned.row_ptr()[r],
                      owned.col() + owned.row_ptr()[r + 1]);
      send_val.insert(send_val.end(), owned.val() + owned.row_ptr()[r],
                      owned.val() + owned.row_ptr()[r + 1]);
    }
  }
  block_begin.push_back(static_cast<std::int64_t>(send_col.size()));
  std::vector<SendMessage> sends;
  std::vector<RecvMessage> recvs;
  for (std::size_t k = 0; k < plan.send_blocks().size(); ++k) {
    const int peer = plan.send_blocks()[k].peer;
    const std::int64_t count = block_begin[k + 1] - block_begin[k];
    sends.push_back({peer, bytes_of(send_col, block_begin[k], count)});
    sends.push_back({peer, bytes_of(send_val, block_begin[k], count)});
  }
  for (const HaloPlan::Block& b : plan.recv_blocks()) {
    const Offset begin = local.row_ptr()[n_owned + b.begin];
    const Offset count = local.row_ptr()[n_owned + b.begin + b.count] - begin;
    recvs.push_back({b.peer, bytes_of(local.col(), begin, count)});
    recvs.push_back({b.peer, bytes_of(local.val(), begin, count)});
  }
  comm.start_exchange(sends, recvs, tags::kSparseRows)->wait();
  for (std::int64_t k = owned_nnz; k < local.nnz(); ++k) {
    if (local.col()[k] < 0 || local.col()[k] >= local.cols()) {
      throw FormatError(fmt::format("gather_sparse_rows on rank {}: received column {} outside "
                                    "[0, {})",
                                    comm.rank(), local.col()[k], local.cols()));
    }
  }
  if (stats != nullptr) {
    ++stats->exchanges;
    stats->bytes_sent += static_cast<std::int64_t>(
        send_length.size() * sizeof(Offset) + send_col.size() * (sizeof(LocalId) + sizeof(float)));
    stats->bytes_received += static_cast<std::int64_t>(
        ghost_length.size() * sizeof(Offset) + ghost_nnz * (sizeof(LocalId) + sizeof(float)));
  }
  return local;
}

template class HaloExchange<float>;
template class HaloExchange<double>;

} // namespace tessera::comm
