// HaloInBlocks: the send rows sorted per peer, so a row block's share of them is a range.
#include "tessera/gnn/halo_blocks.hpp"

#include "tessera/engine/row_blocks.hpp"
#include "tessera/ops/ops.hpp"

#include <algorithm>
#include <numeric>

namespace tessera {

namespace {

Buffer<LocalId> on_backend(const BackendPtr& backend, const std::vector<LocalId>& host) {
  Buffer<LocalId> out(backend, static_cast<std::int64_t>(host.size()));
  backend->copy_from_host(out.data(), host.data(), host.size() * sizeof(LocalId));
  return out;
}

/// Entries [lo, hi) of `ids`.
std::span<const LocalId> entries(const Buffer<LocalId>& ids, std::int64_t lo, std::int64_t hi) {
  return ids.span().subspan(static_cast<std::size_t>(lo), static_cast<std::size_t>(hi - lo));
}

} // namespace

template <typename T>
HaloInBlocks<T>::HaloInBlocks(comm::LayerExchange<T>& halo)
    : halo_(&halo), backend_(halo.backend()) {
  const comm::HaloPlan& plan = halo.plan();
  const std::vector<LocalId>& rows = plan.send_rows();
  std::vector<LocalId> by_row(rows.size());
  std::iota(by_row.begin(), by_row.end(), LocalId{0});
  for (const comm::HaloPlan::Block& b : plan.send_blocks()) {
    std::sort(by_row.begin() + b.begin, by_row.begin() + b.begin + b.count,
              [&](LocalId i, LocalId j) { return rows[i] < rows[j]; });
  }
  std::vector<LocalId> position(rows.size());
  sorted_host_.resize(rows.size());
  for (std::size_t j = 0; j < by_row.size(); ++j) {
    sorted_host_[j] = rows[by_row[j]];
    position[by_row[j]] = static_cast<LocalId>(j);
  }
  sorted_ = on_backend(backend_, sorted_host_);
  by_row_ = on_backend(backend_, by_row);
  position_ = on_backend(backend_, position);
}

template <typename T>
template <typename F>
void HaloInBlocks<T>::for_entries_in(std::int64_t row_begin, std::int64_t row_end, F f) {
  for (const comm::HaloPlan::Block& b : halo_->plan().send_blocks()) {
    const auto first = sorted_host_.begin() + b.begin, last = first + b.count;
    const auto lo = std::lower_bound(first, last, row_begin);
    const auto hi = std::lower_bound(lo, last, row_end);
    if (lo != hi) f(lo - sorted_host_.begin(), hi - sorted_host_.begin());
  }
}

template <typename T>
DenseView<T> HaloInBlocks<T>::rows_buffer(Buffer<T>& buffer, std::int64_t rows,
                                          std::int64_t width) {
  if (buffer.size() < rows * width) buffer = Buffer<T>(backend_, rows * width);
  return DenseView<T>(buffer.data(), rows, width);
}

template <typename T>
void HaloInBlocks<T>::gather(ChunkManager& memory, DenseView<T> x, comm::Pass pass) {
  const comm::HaloPlan& plan = halo_->plan();
  const std::int64_t w = x.cols;
  const DenseView<T> sorted = rows_buffer(sorted_rows_, plan.num_send_rows(), w);
  const DenseView<T> send = rows_buffer(send_rows_, plan.num_send_rows(), w);
  const DenseView<T> ghosts = rows_buffer(ghost_rows_, plan.n_ghost(), w);
  // Pack: each block of owned rows copies the send rows it holds, then the plan's order.
  for_row_blocks(&memory, plan.n_owned(), {rows_of(x, Access::Read)},
                 [&](std::int64_t b, std::int64_t e) {
                   for_entries_in(b, e, [&](std::int64_t lo, std::int64_t hi) {
                     ops::gather_rows(*backend_, ConstDenseView<T>(x), entries(sorted_, lo, hi),
                                      sorted.slice_rows(lo, hi));
                   });
                 });
  ops::gather_rows(*backend_, ConstDenseView<T>(sorted), position_.span(), send);
  halo_->begin_gather_rows(ConstDenseView<T>(send), ghosts, pass);
  halo_->end_gather();
  const DenseView<T> x_ghosts = x.slice_rows(plan.n_owned(), plan.n_local());
  for_row_blocks(&memory, plan.n_ghost(), {rows_of(x_ghosts, Access::Write)},
                 [&](std::int64_t b, std::int64_t e) {
                   ops::copy(*backend_, ConstDenseView<T>(ghosts.slice_rows(b, e)),
                             x_ghosts.slice_rows(b, e));
                 });
}

template <typename T> void HaloInBlocks<T>::scatter_add(ChunkManager& memory, DenseView<T> x) {
  const comm::HaloPlan& plan = halo_->plan();
  const std::int64_t w = x.cols;
  const DenseView<T> ghosts = rows_buffer(ghost_rows_, plan.n_ghost(), w);
  const DenseView<T> received = rows_buffer(send_rows_, plan.num_send_rows(), w);
  const DenseView<T> sorted = rows_buffer(sorted_rows_, plan.num_send_rows(), w);
  const DenseView<T> x_ghosts = x.slice_rows(plan.n_owned(), plan.n_local());
  for_row_blocks(&memory, plan.n_ghost(), {rows_of(x_ghosts, Access::Read)},
                 [&](std::int64_t b, std::int64_t e) {
                   ops::copy(*backend_, ConstDenseView<T>(x_ghosts.slice_rows(b, e)),
                             ghosts.slice_rows(b, e));
                 });
  halo_->begin_scatter_rows(ConstDenseView<T>(ghosts), received);
  halo_->end_scatter_add();
  ops::gather_rows(*backend_, ConstDenseView<T>(received), by_row_.span(), sorted);
  // Each block of owned rows adds its shares peer by peer in the plan's order, as
  // HaloExchange::add_shares does (rows are distinct within one peer's block).
  for_row_blocks(&memory, plan.n_owned(), {rows_of(x, Access::ReadWrite)},
                 [&](std::int64_t b, std::int64_t e) {
                   for_entries_in(b, e, [&](std::int64_t lo, std::int64_t hi) {
                     ops::scatter_add_rows(*backend_, ConstDenseView<T>(sorted.slice_rows(lo, hi)),
                                           entries(sorted_, lo, hi), x);
                   });
                 });
}

template <typename T> std::size_t HaloInBlocks<T>::bytes() const noexcept {
  return sorted_rows_.bytes() + send_rows_.bytes() + ghost_rows_.bytes() + sorted_.bytes() +
         by_row_.bytes() + position_.bytes();
}

template class HaloInBlocks<float>;
template class HaloInBlocks<double>;

} // namespace tessera
