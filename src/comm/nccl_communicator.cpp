// The NCCL communicator: device-memory exchanges and float sums go through the kernels' NCCL
// family on the GPU backend's stream; host-memory traffic and every other collective go through
// the communicator it was made from. No CUDA or NCCL header here: a build without NCCL links
// the family's stubs and make_nccl_communicator says so.
#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/nccl_kernels.hpp"

#include <cstdlib>
#include <cstring>
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

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(std::shared_ptr<Communicator> host, BackendPtr gpu)
      : host_(std::move(host)), gpu_(std::move(gpu)) {
    nccl::NcclId id{};
    if (host_->rank() == 0) id = nccl::nccl_unique_id();
    std::vector<std::byte> bytes(id.begin(), id.end());
    host_->broadcast(bytes, 0);
    std::memcpy(id.data(), bytes.data(), id.size());
    comm_ = nccl::make_nccl_comm(id, host_->rank(), host_->size(), *gpu_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }
  bool accepts_device_memory() const override { return true; }

  void allreduce_sum(std::span<float> values) override {
    if (values.empty()) return;
    if (!nccl::is_device_memory(values.data())) return host_->allreduce_sum(values);
    comm_->allreduce_sum(values);
  }
  std::unique_ptr<Pending> start_allreduce_sum(std::span<float> values) override {
    if (values.empty() || !nccl::is_device_memory(values.data()))
      return host_->start_allreduce_sum(values);
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
    std::vector<nccl::DeviceSend> device_sends;
    std::vector<nccl::DeviceRecv> device_recvs;
    for (const SendMessage& m : sends)
      device_sends.push_back({m.peer, m.data});
    for (const RecvMessage& m : recvs)
      device_recvs.push_back({m.peer, m.data});
    comm_->exchange(device_sends, device_recvs);
    return std::make_unique<StreamOrdered>();
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
  std::string describe() const override {
    return nccl::nccl_version() + " over " + host_->describe();
  }

private:
  std::shared_ptr<Communicator> host_;
  BackendPtr gpu_;
  std::unique_ptr<nccl::NcclComm> comm_;
};

} // namespace

bool nccl_compiled() noexcept {
  return nccl::nccl_compiled();
}

std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host,
                                                     BackendPtr gpu) {
  // Every rank refuses alike, before rank 0 alone would fail making the id.
  if (!nccl::nccl_compiled()) {
    throw NotCompiled("NCCL: this build has no NCCL (it comes with the CUDA backend when nccl.h "
                      "and libnccl are found)");
  }
  if (gpu == nullptr || gpu->kind() != DeviceKind::Cuda) {
    throw InvalidArgument("make_nccl_communicator needs a CUDA backend on every rank");
  }
  return std::make_shared<NcclCommunicator>(std::move(host), std::move(gpu));
}

} // namespace tessera::comm
