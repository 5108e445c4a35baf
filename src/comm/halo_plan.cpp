// Building a HaloPlan: ghost ids travel to their owners, who learn which rows to send.
#include "tessera/comm/halo_plan.hpp"

#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <utility>

namespace tessera::comm {

namespace {

void check_ghost_owners(const Communicator& comm, std::span<const std::int32_t> ghost_owner,
                        std::size_t n_ghost) {
  if (ghost_owner.size() != n_ghost) {
    throw InvalidArgument(fmt::format("halo plan on rank {}: {} ghost owners for {} ghosts",
                                      comm.rank(), ghost_owner.size(), n_ghost));
  }
  for (std::size_t g = 0; g < ghost_owner.size(); ++g) {
    const std::int32_t owner = ghost_owner[g];
    if (owner < 0 || owner >= comm.size() || owner == comm.rank() ||
        (g > 0 && owner < ghost_owner[g - 1])) {
      throw InvalidArgument(fmt::format(
          "halo plan on rank {} of {}: ghost {} has owner {}; owners must be other ranks in "
          "non-decreasing order (a partition store made for another rank count?)",
          comm.rank(), comm.size(), g, owner));
    }
  }
}

} // namespace

HaloPlan HaloPlan::build(Communicator& comm, std::span<const GlobalId> owned_ids,
                         std::span<const GlobalId> ghost_ids,
                         std::span<const std::int32_t> ghost_owner) {
  check_ghost_owners(comm, ghost_owner, ghost_ids.size());
  const int ranks = comm.size();
  HaloPlan plan;
  plan.n_owned_ = static_cast<std::int64_t>(owned_ids.size());
  plan.n_ghost_ = static_cast<std::int64_t>(ghost_ids.size());

  // What we receive: the ghost groups, contiguous by owner.
  std::vector<std::int64_t> recv_counts(static_cast<std::size_t>(ranks), 0);
  for (const std::int32_t owner : ghost_owner)
    ++recv_counts[owner];
  std::int64_t begin = 0;
  for (int q = 0; q < ranks; ++q) {
    if (recv_counts[q] > 0) plan.recv_.push_back({q, begin, recv_counts[q]});
    begin += recv_counts[q];
  }

  // What we send: each peer tells us how many of our rows it reads, then which.
  const std::vector<std::int64_t> send_counts = comm.alltoall(recv_counts);
  begin = 0;
  for (int q = 0; q < ranks; ++q) {
    if (send_counts[q] > 0) plan.send_.push_back({q, begin, send_counts[q]});
    begin += send_counts[q];
  }
  std::vector<GlobalId> wanted(static_cast<std::size_t>(begin)); // [num_send_rows]
  std::vector<SendMessage> sends;
  std::vector<RecvMessage> recvs;
  for (const Block& b : plan.recv_) {
    sends.push_back({b.peer, std::as_bytes(ghost_ids.subspan(static_cast<std::size_t>(b.begin),
                                                             static_cast<std::size_t>(b.count)))});
  }
  for (const Block& b : plan.send_) {
    recvs.push_back(
        {b.peer, std::as_writable_bytes(std::span<GlobalId>(wanted).subspan(
                     static_cast<std::size_t>(b.begin), static_cast<std::size_t>(b.count)))});
  }
  comm.start_exchange(sends, recvs, tags::kHaloPlan)->wait();

  // Global → local for our rows (owned rows may be in any order, e.g. RCM).
  std::vector<std::pair<GlobalId, LocalId>> by_id(owned_ids.size());
  for (std::size_t r = 0; r < owned_ids.size(); ++r)
    by_id[r] = {owned_ids[r], static_cast<LocalId>(r)};
  std::sort(by_id.begin(), by_id.end());
  plan.send_rows_.resize(wanted.size());
  for (const Block& b : plan.send_) {
    for (std::int64_t i = b.begin; i < b.begin + b.count; ++i) {
      const auto it =
          std::lower_bound(by_id.begin(), by_id.end(), std::pair<GlobalId, LocalId>{wanted[i], 0});
      if (it == by_id.end() || it->first != wanted[i]) {
        throw InvalidArgument(fmt::format("halo plan: rank {} asks rank {} for vertex {}, which "
                                          "rank {} does not own (tiles from different partitions?)",
                                          b.peer, comm.rank(), wanted[i], comm.rank()));
      }
      plan.send_rows_[i] = it->second;
    }
  }
  return plan;
}

} // namespace tessera::comm
