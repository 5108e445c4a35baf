// The MPI implementation of Communicator, and the MPI environment.
#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <climits>
#include <fmt/core.h>
#include <mpi.h>

namespace tessera::comm {

namespace {

/// Throws MpiError quoting the call and MPI's text for `code`.
void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw MpiError(fmt::format("{} failed (rank {}): {}", call, world_rank(),
                             std::string(text, static_cast<std::size_t>(length))));
}

#define TESSERA_MPI_CHECK(call) check((call), #call)

/// MPI counts are int: longer messages travel as consecutive pieces of at most 1 GiB, which MPI
/// delivers in order between one pair of ranks on one tag.
constexpr std::size_t kMaxPiece = std::size_t{1} << 30;

class MpiPending final : public Pending {
public:
  explicit MpiPending(std::vector<MPI_Request> requests) : requests_(std::move(requests)) {}
  ~MpiPending() override {
    if (!requests_.empty())
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }
  void wait() override {
    if (requests_.empty()) return;
    const int code =
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    check(code, "MPI_Waitall");
  }
  bool test() override {
    if (requests_.empty()) return true;
    int done = 0;
    const int code = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                                 MPI_STATUSES_IGNORE);
    // A failed request cannot be waited for again: drop them all before throwing.
    if (code != MPI_SUCCESS || done != 0) requests_.clear();
    check(code, "MPI_Testall");
    return done != 0;
  }

private:
  std::vector<MPI_Request> requests_;
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator() {
    TESSERA_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    // Errors come back as codes, which check() turns into exceptions naming the call.
    TESSERA_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    TESSERA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    TESSERA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    MPI_Comm node = MPI_COMM_NULL;
    TESSERA_MPI_CHECK(
        MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
    TESSERA_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
    TESSERA_MPI_CHECK(MPI_Comm_size(node, &local_size_));
    TESSERA_MPI_CHECK(MPI_Comm_free(&node));
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void allreduce_sum(std::span<float> v) override {
    allreduce(v.data(), v.size(), MPI_FLOAT, MPI_SUM);
  }
  void allreduce_sum(std::span<double> v) override {
    allreduce(v.data(), v.size(), MPI_DOUBLE, MPI_SUM);
  }
  void allreduce_sum(std::span<std::int64_t> v) override {
    allreduce(v.data(), v.size(), MPI_INT64_T, MPI_SUM);
  }
  void allreduce_max(std::span<double> v) override {
    allreduce(v.data(), v.size(), MPI_DOUBLE, MPI_MAX);
  }

  std::unique_ptr<Pending> start_allreduce_sum(std::span<float> v) override {
    std::vector<MPI_Request> requests;
    // Pieces of at most 1 Gi values each, started in order: every rank cuts the same count
    // alike, so the k-th pieces match.
    constexpr std::size_t kMaxValues = std::size_t{1} << 30;
    for (std::size_t at = 0; at < v.size(); at += kMaxValues) {
      const auto piece = static_cast<int>(std::min(kMaxValues, v.size() - at));
      requests.emplace_back();
      TESSERA_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, v.data() + at, piece, MPI_FLOAT, MPI_SUM,
                                       comm_, &requests.back()));
    }
    return std::make_unique<MpiPending>(std::move(requests));
  }

  std::vector<std::int64_t> alltoall(std::span<const std::int64_t> send) override {
    if (static_cast<int>(send.size()) != size_) {
      throw InvalidArgument(
          fmt::format("alltoall needs one value per rank ({}), got {}", size_, send.size()));
    }
    std::vector<std::int64_t> recv(send.size());
    TESSERA_MPI_CHECK(
        MPI_Alltoall(send.data(), 1, MPI_INT64_T, recv.data(), 1, MPI_INT64_T, comm_));
    return recv;
  }

  void broadcast(std::vector<std::byte>& values, int root) override {
    std::int64_t count = static_cast<std::int64_t>(values.size());
    TESSERA_MPI_CHECK(MPI_Bcast(&count, 1, MPI_INT64_T, root, comm_));
    values.resize(static_cast<std::size_t>(count));
    for (std::size_t at = 0; at < values.size(); at += kMaxPiece) {
      const auto piece = static_cast<int>(std::min(kMaxPiece, values.size() - at));
      TESSERA_MPI_CHECK(MPI_Bcast(values.data() + at, piece, MPI_BYTE, root, comm_));
    }
  }

  std::vector<double> allgather(double value) override {
    std::vector<double> all(static_cast<std::size_t>(size_));
    TESSERA_MPI_CHECK(MPI_Allgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_));
    return all;
  }

  std::unique_ptr<Pending> start_exchange(std::span<const SendMessage> sends,
                                          std::span<const RecvMessage> recvs, int tag) override {
    std::vector<MPI_Request> requests;
    // Receives first, so a matching send finds its buffer posted.
    for (const RecvMessage& m : recvs) {
      for (std::size_t at = 0; at < m.data.size(); at += kMaxPiece) {
        const auto piece = static_cast<int>(std::min(kMaxPiece, m.data.size() - at));
        requests.emplace_back();
        TESSERA_MPI_CHECK(
            MPI_Irecv(m.data.data() + at, piece, MPI_BYTE, m.peer, tag, comm_, &requests.back()));
      }
    }
    for (const SendMessage& m : sends) {
      for (std::size_t at = 0; at < m.data.size(); at += kMaxPiece) {
        const auto piece = static_cast<int>(std::min(kMaxPiece, m.data.size() - at));
        requests.emplace_back();
        TESSERA_MPI_CHECK(
            MPI_Isend(m.data.data() + at, piece, MPI_BYTE, m.peer, tag, comm_, &requests.back()));
      }
    }
    return std::make_unique<MpiPending>(std::move(requests));
  }

  void send(std::span<const std::byte> data, int peer, int tag) override {
    const auto count = static_cast<std::int64_t>(data.size());
    TESSERA_MPI_CHECK(MPI_Send(&count, 1, MPI_INT64_T, peer, tag, comm_));
    for (std::size_t at = 0; at < data.size(); at += kMaxPiece) {
      const auto piece = static_cast<int>(std::min(kMaxPiece, data.size() - at));
      TESSERA_MPI_CHECK(MPI_Send(data.data() + at, piece, MPI_BYTE, peer, tag, comm_));
    }
  }

  std::vector<std::byte> receive(int peer, int tag) override {
    std::int64_t count = 0;
    TESSERA_MPI_CHECK(MPI_Recv(&count, 1, MPI_INT64_T, peer, tag, comm_, MPI_STATUS_IGNORE));
    std::vector<std::byte> data(static_cast<std::size_t>(count));
    for (std::size_t at = 0; at < data.size(); at += kMaxPiece) {
      const auto piece = static_cast<int>(std::min(kMaxPiece, data.size() - at));
      TESSERA_MPI_CHECK(
          MPI_Recv(data.data() + at, piece, MPI_BYTE, peer, tag, comm_, MPI_STATUS_IGNORE));
    }
    return data;
  }

  void barrier() override { TESSERA_MPI_CHECK(MPI_Barrier(comm_)); }

  [[noreturn]] void abort(int code) noexcept override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort(); // MPI_Abort does not return; this satisfies [[noreturn]]
  }

  std::string describe() const override {
    return fmt::format("MPI ({} rank{})", size_, size_ == 1 ? "" : "s");
  }

private:
  void allreduce(void* data, std::size_t count, MPI_Datatype type, MPI_Op op) {
    if (count > static_cast<std::size_t>(INT_MAX)) {
      throw InvalidArgument(fmt::format("allreduce of {} values exceeds MPI's int count", count));
    }
    TESSERA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, comm_));
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
};

} // namespace

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  TESSERA_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize(); // the destructor of an object whose constructor threw does not run
    throw MpiError(fmt::format("MPI gives thread level {}; Tessera needs MPI_THREAD_FUNNELED ({})",
                               provided, MPI_THREAD_FUNNELED));
  }
  owns_ = true;
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

std::shared_ptr<Communicator> make_mpi_communicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw MpiError("make_mpi_communicator: MPI is not initialized (MpiEnvironment)");
  return std::make_shared<MpiCommunicator>();
}

int world_rank() noexcept {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

} // namespace tessera::comm
