// The communicator of a job with one process and no MPI: every collective is the identity.
#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"

#include <cstdlib>
#include <cstring>
#include <fmt/core.h>

namespace tessera::comm {

namespace {

class SelfPending final : public Pending {
public:
  void wait() override {}
  bool test() override { return true; }
};

class SelfCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  bool accepts_device_memory() const override { return true; } // nothing ever moves

  void allreduce_sum(std::span<float>) override {}
  void allreduce_sum(std::span<double>) override {}
  void allreduce_sum(std::span<std::int64_t>) override {}
  void allreduce_max(std::span<double>) override {}
  std::unique_ptr<Pending> start_allreduce_sum(std::span<float>) override {
    return std::make_unique<SelfPending>();
  }
  std::vector<std::int64_t> alltoall(std::span<const std::int64_t> send) override {
    if (send.size() != 1) {
      throw InvalidArgument(
          fmt::format("alltoall on one rank needs one value, got {}", send.size()));
    }
    return {send.begin(), send.end()};
  }
  void broadcast(std::vector<std::byte>&, int) override {}
  std::vector<double> allgather(double value) override { return {value}; }

  std::unique_ptr<Pending> start_exchange(std::span<const SendMessage> sends,
                                          std::span<const RecvMessage> recvs, int) override {
    if (!sends.empty() || !recvs.empty()) {
      throw InvalidArgument("a one-rank job has no peer to exchange messages with");
    }
    return std::make_unique<SelfPending>();
  }
  void send(std::span<const std::byte>, int peer, int) override { no_peer(peer); }
  std::vector<std::byte> receive(int peer, int) override { no_peer(peer); }
  void barrier() override {}
  [[noreturn]] void abort(int code) noexcept override { std::exit(code); }
  std::string describe() const override { return "one process"; }

  std::shared_ptr<Communicator> concurrent_duplicate() override {
    auto copy = std::make_shared<SelfCommunicator>();
    copy->peer_watch().set_limit(peer_watch().fixed_limit());
    return copy;
  }

private:
  [[noreturn]] static void no_peer(int peer) {
    throw InvalidArgument(fmt::format("a one-rank job has no rank {}", peer));
  }
};

} // namespace

std::shared_ptr<Communicator> make_self_communicator() {
  return std::make_shared<SelfCommunicator>();
}

bool launched_by_mpi() noexcept {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

} // namespace tessera::comm
