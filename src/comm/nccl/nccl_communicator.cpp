// The NCCL communicator: device-memory exchanges (grouped ncclSend / ncclRecv) and float sums
// (ncclAllReduce) on the GPU backend's stream; host-memory traffic and every other collective
// go through the MPI communicator it was made from.
#include "kernels/cuda/cuda_libraries.hpp"
#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"

#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>
#include <fmt/core.h>
#include <memory>
#include <nccl.h>
#include <string>
#include <vector>

namespace tessera::comm {

namespace {

/// The NCCL functions used here, loaded on first use (a binary without NCCL still runs).
struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGetErrorString) error_string;
};

const NcclApi& nccl() {
  static const NcclApi api = [] {
    const kernels::cuda::SharedLibrary lib("libnccl.so." + std::to_string(NCCL_MAJOR));
    NcclApi a{};
    lib.get(a.get_unique_id, "ncclGetUniqueId");
    lib.get(a.comm_init_rank, "ncclCommInitRank");
    lib.get(a.comm_destroy, "ncclCommDestroy");
    lib.get(a.comm_abort, "ncclCommAbort");
    lib.get(a.all_reduce, "ncclAllReduce");
    lib.get(a.group_start, "ncclGroupStart");
    lib.get(a.group_end, "ncclGroupEnd");
    lib.get(a.send, "ncclSend");
    lib.get(a.recv, "ncclRecv");
    lib.get(a.error_string, "ncclGetErrorString");
    return a;
  }();
  return api;
}

void check(ncclResult_t status, const char* call, int rank) {
  if (status == ncclSuccess) return;
  throw NcclError(fmt::format("{} failed on rank {}: {}", call, rank, nccl().error_string(status)));
}

void check(cudaError_t status, const char* call, int rank) {
  if (status == cudaSuccess) return;
  throw CudaError(fmt::format("{} failed on rank {}: {}", call, rank, cudaGetErrorString(status)));
}

/// Whether `ptr` is device memory (anything else travels through MPI).
bool on_device(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

/// Stream-ordered: kernels queued after it on the same stream see the data, so waiting
/// costs the host nothing.
class StreamOrdered final : public Pending {
public:
  void wait() override {}
};

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(std::shared_ptr<Communicator> host, BackendPtr gpu)
      : host_(std::move(host)), gpu_(std::move(gpu)) {
    const int rank = host_->rank();
    ncclUniqueId id{};
    if (rank == 0) check(nccl().get_unique_id(&id), "ncclGetUniqueId", rank);
    std::vector<std::byte> bytes(sizeof(id));
    std::memcpy(bytes.data(), &id, sizeof(id));
    host_->broadcast(bytes, 0);
    std::memcpy(&id, bytes.data(), sizeof(id));
    check(cudaSetDevice(gpu_->device_id()), "cudaSetDevice", rank);
    check(nccl().comm_init_rank(&comm_, host_->size(), id, rank), "ncclCommInitRank", rank);
    stream_ = static_cast<cudaStream_t>(gpu_->native_stream());
  }
  ~NcclCommunicator() override {
    if (comm_ != nullptr) nccl().comm_destroy(comm_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_size() const override { return host_->local_size(); }
  bool accepts_device_memory() const override { return true; }

  void allreduce_sum(std::span<float> values) override {
    if (values.empty()) return;
    if (!on_device(values.data())) return host_->allreduce_sum(values);
    check(nccl().all_reduce(values.data(), values.data(), values.size(), ncclFloat, ncclSum, comm_,
                            stream_),
          "ncclAllReduce", rank());
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
    const bool device = (!sends.empty() && on_device(sends.front().data.data())) ||
                        (!recvs.empty() && on_device(recvs.front().data.data()));
    if (!device) return host_->start_exchange(sends, recvs, tag);
    check(nccl().group_start(), "ncclGroupStart", rank());
    for (const SendMessage& m : sends) {
      check(nccl().send(m.data.data(), m.data.size(), ncclUint8, m.peer, comm_, stream_),
            "ncclSend", rank());
    }
    for (const RecvMessage& m : recvs) {
      check(nccl().recv(m.data.data(), m.data.size(), ncclUint8, m.peer, comm_, stream_),
            "ncclRecv", rank());
    }
    check(nccl().group_end(), "ncclGroupEnd", rank());
    return std::make_unique<StreamOrdered>();
  }

  void send(std::span<const std::byte> data, int peer, int tag) override {
    host_->send(data, peer, tag);
  }
  std::vector<std::byte> receive(int peer, int tag) override { return host_->receive(peer, tag); }
  void barrier() override { host_->barrier(); }
  [[noreturn]] void abort(int code) noexcept override {
    nccl().comm_abort(comm_);
    comm_ = nullptr;
    host_->abort(code);
    std::abort(); // not reached: the host communicator ends the job
  }
  std::string describe() const override {
    return fmt::format("NCCL {}.{}.{} over {}", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
                       host_->describe());
  }

private:
  std::shared_ptr<Communicator> host_;
  BackendPtr gpu_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

} // namespace

bool nccl_compiled() noexcept {
  return true;
}

std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host,
                                                     BackendPtr gpu) {
  if (gpu == nullptr || gpu->kind() != DeviceKind::Cuda) {
    throw InvalidArgument("make_nccl_communicator needs a CUDA backend on every rank");
  }
  return std::make_shared<NcclCommunicator>(std::move(host), std::move(gpu));
}

} // namespace tessera::comm
