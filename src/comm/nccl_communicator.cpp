// The NCCL communicator: device-memory exchanges between GPU ranks (and float sums, when every
// rank has a GPU) go through the kernels' NCCL family on the GPU backend's stream; device
// messages to CPU ranks are staged through host memory; host-memory traffic and every other
// collective go through the communicator it was made from. No CUDA or NCCL header here: a build
// without NCCL links the family's stubs and make_nccl_communicator says so.
#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/nccl_kernels.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/core.h>
#include <memory>
#include <string>
#include <vector>

namespace tessera::comm {

namespace {

namespace nccl = kernels::cuda;

/// Stream-ordered: kernels queued after it on the same stream see the data, so waiting
/// costs the host nothing.
class StreamOrdered final : public Pending {
public:
  void wait() override {}
  bool test() override { return true; }
};

/// Device messages to and from CPU ranks, staged through host buffers: the sends copied out
/// when staged, the receives copied in by wait(). Then `after` (stream-ordered NCCL work, or
/// nothing) is done too.
class Staged final : public Pending {
public:
  Staged(const Backend& gpu, std::size_t messages) : gpu_(gpu) { buffers_.reserve(messages); }
  ~Staged() override {
    try {
      wait();
    } catch (...) { // destroying must not throw; the failure was the caller's to wait for
    }
  }

  void send(int peer, std::span<const std::byte> device) {
    std::vector<std::byte>& host = buffers_.emplace_back(device.size());
    gpu_.copy_to_host(host.data(), device.data(), device.size());
    sends_.push_back({peer, host});
  }
  void receive(int peer, std::span<std::byte> device) {
    std::vector<std::byte>& host = buffers_.emplace_back(device.size());
    recvs_.push_back({peer, host});
    targets_.push_back(device);
  }
  bool empty() const noexcept { return sends_.empty() && recvs_.empty(); }
  void start(Communicator& host, int tag) { inner_ = host.start_exchange(sends_, recvs_, tag); }

  void wait() override {
    if (done_ || inner_ == nullptr) return;
    inner_->wait();
    done_ = true;
    for (std::size_t i = 0; i < recvs_.size(); ++i)
      gpu_.copy_from_host(targets_[i].data(), recvs_[i].data.data(), targets_[i].size());
  }
  bool test() override { return done_ || inner_ == nullptr || inner_->test(); }

private:
  const Backend& gpu_;
  std::vector<std::vector<std::byte>> buffers_; // reserved: the spans below stay valid
  std::vector<SendMessage> sends_;
  std::vector<RecvMessage> recvs_;
  std::vector<std::span<std::byte>> targets_;
  std::unique_ptr<Pending> inner_;
  bool done_ = false;
};

/// A float sum of device memory over ranks some of which have no GPU: staged through a host
/// copy and summed by the host communicator; wait() copies the sum back.
class StagedSum final : public Pending {
public:
  StagedSum(const Backend& gpu, Communicator& host, std::span<float> device)
      : gpu_(gpu), device_(device), host_values_(device.size()) {
    gpu_.copy_to_host(host_values_.data(), device.data(), device.size_bytes());
    inner_ = host.start_allreduce_sum(host_values_);
  }
  ~StagedSum() override {
    try {
      wait();
    } catch (...) { // destroying must not throw
    }
  }
  void wait() override {
    if (done_) return;
    inner_->wait();
    done_ = true;
    gpu_.copy_from_host(device_.data(), host_values_.data(), device_.size_bytes());
  }
  bool test() override { return done_ || inner_->test(); }

private:
  const Backend& gpu_;
  std::span<float> device_;
  std::vector<float> host_values_;
  std::unique_ptr<Pending> inner_;
  bool done_ = false;
};

/// A GPU rank's communicator. Device-memory messages to other GPU ranks and, when every rank has
/// a GPU, float sums of device memory go through NCCL on the GPU's stream; device messages to
/// CPU ranks and (then) the sums go through the host communicator, staged through host memory;
/// host memory and every other collective through the host communicator.
class NcclCommunicator final : public Communicator {
public:
  /// nccl_rank: [ranks] each rank's place among the GPU ranks (-1: a CPU rank); `id` made by
  /// the first GPU rank.
  NcclCommunicator(std::shared_ptr<Communicator> host, BackendPtr gpu, std::vector<int> nccl_rank,
                   const nccl::NcclId& id)
      : host_(std::move(host)), gpu_(std::move(gpu)), nccl_rank_(std::move(nccl_rank)) {
    gpu_ranks_ = static_cast<int>(
        std::count_if(nccl_rank_.begin(), nccl_rank_.end(), [](int r) { return r >= 0; }));
    comm_ = nccl::make_nccl_comm(id, nccl_rank_[static_cast<std::size_t>(host_->rank())],
                                 gpu_ranks_, *gpu_);
  }

  PeerWatch& peer_watch() override { return host_->peer_watch(); }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }
  bool accepts_device_memory() const override { return true; }

  void allreduce_sum(std::span<float> values) override {
    if (values.empty()) return;
    if (!nccl::is_device_memory(values.data())) return host_->allreduce_sum(values);
    if (all_gpu()) return comm_->allreduce_sum(values);
    StagedSum(*gpu_, *host_, values).wait();
  }
  std::unique_ptr<Pending> start_allreduce_sum(std::span<float> values) override {
    if (values.empty() || !nccl::is_device_memory(values.data()))
      return host_->start_allreduce_sum(values);
    if (!all_gpu()) return std::make_unique<StagedSum>(*gpu_, *host_, values);
    comm_->allreduce_sum(values);
    return std::make_unique<StreamOrdered>();
  }
  void allreduce_sum(std::span<double> values) override { host_->allreduce_sum(values); }
  void allreduce_sum(std::span<std::int64_t> values) override { host_->allreduce_sum(values); }
  void allreduce_max(std::span<double> values) override { host_->allreduce_max(values); }
  std::vector<std::int64_t> alltoall(std::span<const std::int64_t> send) override {
    return host_->alltoall(send);
  }
  void broadcast(std::vector<std::byte>& values, int root) override {
    host_->broadcast(values, root);
  }
  std::vector<double> allgather(double value) override { return host_->allgather(value); }

  std::unique_ptr<Pending> start_exchange(std::span<const SendMessage> sends,
                                          std::span<const RecvMessage> recvs, int tag) override {
    const bool device = (!sends.empty() && nccl::is_device_memory(sends.front().data.data())) ||
                        (!recvs.empty() && nccl::is_device_memory(recvs.front().data.data()));
    if (!device) return host_->start_exchange(sends, recvs, tag);
    // The staged sends are copied out first: their copies wait for the stream, which must not
    // hold NCCL work that waits for a peer.
    auto staged = std::make_unique<Staged>(*gpu_, sends.size() + recvs.size());
    std::vector<nccl::DeviceSend> device_sends;
    std::vector<nccl::DeviceRecv> device_recvs;
    for (const SendMessage& m : sends) {
      const int to = nccl_rank_of(m.peer);
      if (to >= 0) {
        device_sends.push_back({to, m.data});
      } else {
        staged->send(m.peer, m.data);
      }
    }
    for (const RecvMessage& m : recvs) {
      const int from = nccl_rank_of(m.peer);
      if (from >= 0) {
        device_recvs.push_back({from, m.data});
      } else {
        staged->receive(m.peer, m.data);
      }
    }
    if (!device_sends.empty() || !device_recvs.empty()) comm_->exchange(device_sends, device_recvs);
    if (staged->empty()) return std::make_unique<StreamOrdered>();
    staged->start(*host_, tag);
    return staged;
  }

  void send(std::span<const std::byte> data, int peer, int tag) override {
    host_->send(data, peer, tag);
  }
  std::vector<std::byte> receive(int peer, int tag) override { return host_->receive(peer, tag); }
  void barrier() override { host_->barrier(); }
  [[noreturn]] void abort(int code) noexcept override {
    comm_->abort();
    host_->abort(code);
    std::abort(); // not reached: the host communicator ends the job
  }
  std::shared_ptr<Communicator> concurrent_duplicate() override {
    return host_->concurrent_duplicate();
  }

  std::string describe() const override {
    if (all_gpu()) return nccl::nccl_version() + " over " + host_->describe();
    return fmt::format("{} among the {} GPU ranks, staged through host memory to the {} CPU "
                       "rank(s), over {}",
                       nccl::nccl_version(), gpu_ranks_, size() - gpu_ranks_, host_->describe());
  }

private:
  bool all_gpu() const noexcept { return gpu_ranks_ == size(); }
  /// `peer`'s place among the GPU ranks, -1 for a CPU rank; throws for a rank outside the job.
  int nccl_rank_of(int peer) const {
    if (peer < 0 || peer >= size()) {
      throw InvalidArgument(
          fmt::format("exchange names rank {}, outside the job's {} ranks", peer, size()));
    }
    return nccl_rank_[static_cast<std::size_t>(peer)];
  }

  std::shared_ptr<Communicator> host_;
  BackendPtr gpu_;
  std::vector<int> nccl_rank_;
  int gpu_ranks_ = 0;
  std::unique_ptr<nccl::NcclComm> comm_;
};

} // namespace

bool nccl_compiled() noexcept {
  return nccl::nccl_compiled();
}

std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host,
                                                     BackendPtr gpu) {
  // Every rank refuses alike, before one rank alone would fail making the id.
  if (!nccl::nccl_compiled()) {
    throw NotCompiled("NCCL: this build has no NCCL (it comes with the CUDA backend when nccl.h "
                      "and libnccl are found)");
  }
  if (gpu == nullptr) throw InvalidArgument("make_nccl_communicator needs every rank's backend");
  // Which ranks train on a GPU: an allgather (each rank fills its own entry).
  std::vector<std::int64_t> on_gpu(static_cast<std::size_t>(host->size()), 0);
  on_gpu[static_cast<std::size_t>(host->rank())] = gpu->kind() == DeviceKind::Cuda ? 1 : 0;
  host->allreduce_sum(std::span<std::int64_t>(on_gpu));
  std::vector<int> nccl_rank(on_gpu.size(), -1);
  int gpu_ranks = 0, root = -1;
  for (std::size_t r = 0; r < on_gpu.size(); ++r) {
    if (on_gpu[r] == 0) continue;
    nccl_rank[r] = gpu_ranks++;
    if (root < 0) root = static_cast<int>(r);
  }
  if (gpu_ranks == 0) return host; // nothing for NCCL to do
  nccl::NcclId id{};
  if (host->rank() == root) id = nccl::nccl_unique_id();
  std::vector<std::byte> bytes(id.begin(), id.end());
  host->broadcast(bytes, root);
  if (gpu->kind() != DeviceKind::Cuda) return host; // a CPU rank: host memory, host transport
  std::memcpy(id.data(), bytes.data(), id.size());
  return std::make_shared<NcclCommunicator>(std::move(host), std::move(gpu), std::move(nccl_rank),
                                            id);
}

} // namespace tessera::comm
