// The NCCL family on NCCL itself, loaded on first use (a binary without libnccl still runs):
// grouped ncclSend / ncclRecv and ncclAllReduce on a CUDA backend's stream.
#include "tessera/kernels/nccl_kernels.hpp"

#include "cuda_libraries.hpp"
#include "tessera/core/error.hpp"

#include <cstring>
#include <cuda_runtime_api.h>
#include <fmt/core.h>
#include <nccl.h>

namespace tessera::kernels::cuda {

namespace {

static_assert(sizeof(ncclUniqueId) == std::tuple_size_v<NcclId>, "ncclUniqueId is 128 bytes");

/// The NCCL functions used here, loaded on first use.
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
    const SharedLibrary lib("libnccl.so." + std::to_string(NCCL_MAJOR));
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

class Nccl final : public NcclComm {
public:
  Nccl(const NcclId& id, int rank, int size, const Backend& gpu)
      : rank_(rank), stream_(static_cast<cudaStream_t>(gpu.native_stream())) {
    ncclUniqueId nccl_id{};
    std::memcpy(&nccl_id, id.data(), sizeof nccl_id);
    check(cudaSetDevice(gpu.device_id()), "cudaSetDevice", rank_);
    check(nccl().comm_init_rank(&comm_, size, nccl_id, rank_), "ncclCommInitRank", rank_);
  }
  ~Nccl() override {
    if (comm_ != nullptr) nccl().comm_destroy(comm_);
  }
  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;

  void allreduce_sum(std::span<float> values) override {
    check(nccl().all_reduce(values.data(), values.data(), values.size(), ncclFloat, ncclSum, comm_,
                            stream_),
          "ncclAllReduce", rank_);
  }

  void exchange(std::span<const DeviceSend> sends, std::span<const DeviceRecv> recvs) override {
    check(nccl().group_start(), "ncclGroupStart", rank_);
    for (const DeviceSend& m : sends) {
      check(nccl().send(m.data.data(), m.data.size(), ncclUint8, m.peer, comm_, stream_),
            "ncclSend", rank_);
    }
    for (const DeviceRecv& m : recvs) {
      check(nccl().recv(m.data.data(), m.data.size(), ncclUint8, m.peer, comm_, stream_),
            "ncclRecv", rank_);
    }
    check(nccl().group_end(), "ncclGroupEnd", rank_);
  }

  void abort() noexcept override {
    if (comm_ != nullptr) nccl().comm_abort(comm_);
    comm_ = nullptr;
  }

private:
  int rank_;
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
};

} // namespace

bool nccl_compiled() noexcept {
  return true;
}

NcclId nccl_unique_id() {
  ncclUniqueId id{};
  check(nccl().get_unique_id(&id), "ncclGetUniqueId", 0);
  NcclId bytes{};
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

std::unique_ptr<NcclComm> make_nccl_comm(const NcclId& id, int rank, int size, const Backend& gpu) {
  if (gpu.kind() != DeviceKind::Cuda) {
    throw InvalidArgument("an NCCL communicator needs a CUDA backend, got " + gpu.describe());
  }
  return std::make_unique<Nccl>(id, rank, size, gpu);
}

bool is_device_memory(const void* ptr) noexcept {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

std::string nccl_version() {
  return fmt::format("NCCL {}.{}.{}", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
}

} // namespace tessera::kernels::cuda
