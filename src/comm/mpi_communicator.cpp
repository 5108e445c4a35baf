// The MPI implementation of Communicator, and the MPI environment.
#include "tessera/comm/communicator.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <fmt/core.h>
#include <mpi.h>
#include <thread>

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

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// What a communicator and its pending requests share: the MPI communicator, this rank, and the
/// watchdog's state. After a timeout the communicator is broken: its requests are abandoned
/// (waiting on them could hang; the job is about to end) and further calls refused.
struct Shared {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  PeerWatch* watch = nullptr;
  bool broken = false;
};

/// Answers the pings of ranks that timed out and ask who still answers (see silent_ranks).
void answer_pings(Shared& shared) {
  for (;;) {
    int pinged = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, tags::kWatchdogPing, shared.comm, &pinged, &status) !=
            MPI_SUCCESS ||
        pinged == 0) {
      return;
    }
    int token = 0;
    MPI_Recv(&token, 1, MPI_INT, status.MPI_SOURCE, tags::kWatchdogPing, shared.comm,
             MPI_STATUS_IGNORE);
    MPI_Request answer = MPI_REQUEST_NULL;
    // From `shared`, which outlives the send; freed at once: nothing waits for it.
    MPI_Isend(&shared.rank, 1, MPI_INT, status.MPI_SOURCE, tags::kWatchdogPong, shared.comm,
              &answer);
    MPI_Request_free(&answer);
  }
}

/// The ranks of `asked` that do not answer a ping within `grace` seconds: a rank waiting in a
/// watched call answers (answer_pings), one that is stopped, stuck outside MPI or gone does not.
std::vector<int> silent_ranks(Shared& shared, const std::vector<int>& asked, double grace) {
  std::vector<int> answers(asked.size(), -1);
  std::vector<MPI_Request> replies(asked.size(), MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < asked.size(); ++i) {
    MPI_Request ping = MPI_REQUEST_NULL;
    MPI_Isend(&shared.rank, 1, MPI_INT, asked[i], tags::kWatchdogPing, shared.comm, &ping);
    MPI_Request_free(&ping);
    MPI_Irecv(&answers[i], 1, MPI_INT, asked[i], tags::kWatchdogPong, shared.comm, &replies[i]);
  }
  const Clock::time_point start = Clock::now();
  std::vector<bool> answered(asked.size(), false);
  while (seconds_since(start) < grace) {
    bool all = true;
    for (std::size_t i = 0; i < asked.size(); ++i) {
      if (answered[i]) continue;
      int done = 0;
      MPI_Test(&replies[i], &done, MPI_STATUS_IGNORE);
      answered[i] = done != 0;
      all = all && answered[i];
    }
    if (all) break;
    answer_pings(shared);
  }
  std::vector<int> silent;
  for (std::size_t i = 0; i < asked.size(); ++i) {
    if (!answered[i]) silent.push_back(asked[i]);
  }
  return silent; // unanswered receives are abandoned with the broken communicator
}

/// "rank 1" or "ranks 1, 3".
std::string ranks_text(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

/// Finds whom a wait past the limit waits for and throws PeerTimeout naming them, the step and
/// what waited. `peers`[i] is request i's peer, -1 for a collective of every rank.
[[noreturn]] void time_out(Shared& shared, std::vector<MPI_Request>& requests,
                           const std::vector<int>& peers, const std::string& what, double waited) {
  shared.broken = true;
  const double limit = shared.watch->limit();
  bool collective = false;
  std::vector<int> waited_for;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    int done = 0;
    MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
    if (done != 0) continue;
    if (peers[i] < 0) {
      collective = true;
    } else if (std::find(waited_for.begin(), waited_for.end(), peers[i]) == waited_for.end()) {
      waited_for.push_back(peers[i]);
    }
  }
  std::sort(waited_for.begin(), waited_for.end());
  // In a collective any rank may be missing: every other one is asked.
  std::vector<int> asked = waited_for;
  if (collective) {
    asked.clear();
    for (int r = 0; r < shared.size; ++r) {
      if (r != shared.rank) asked.push_back(r);
    }
  }
  const std::vector<int> silent = silent_ranks(shared, asked, std::clamp(limit / 4, 1.0, 10.0));
  const std::string whom =
      collective ? fmt::format("the other ranks of a collective of all {}", shared.size)
                 : ranks_text(waited_for);
  const std::string why =
      silent.empty()
          ? "every rank asked answers, yet the wait does not end (ranks in different steps?)"
          : ranks_text(silent) + (silent.size() == 1 ? " does" : " do") +
                " not answer (stopped, stuck or on a lost node)";
  requests.clear(); // abandoned: the job ends
  throw PeerTimeout(fmt::format("rank {} has waited {:.0f} s for {} in {} during {}; {}: ending "
                                "the job (limit {:.0f} s: {})",
                                shared.rank, waited, whom, what, shared.watch->step(), why, limit,
                                shared.watch->describe_limit()));
}

/// Waits for every one of `requests` (polling as MPI_Waitall does), bounded by the watchdog's
/// limit: past it, time_out. A long wait that ends is told to the watchdog (a stall).
void watched_wait(Shared& shared, std::vector<MPI_Request>& requests, const std::vector<int>& peers,
                  const std::string& what) {
  if (requests.empty()) return;
  if (shared.broken) {
    throw PeerTimeout("the communicator of rank " + std::to_string(shared.rank) +
                      " timed out waiting for a peer before (or its waits were cancelled): no "
                      "more messages can be waited for");
  }
  const Clock::time_point start = Clock::now();
  const double limit = shared.watch->limit();
  const double answer_after = std::min(1.0, limit / 4);
  double waited = 0.0;
  for (unsigned spin = 1;; ++spin) {
    int done = 0;
    const int code =
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    // A failed request cannot be waited for again: drop them all before throwing.
    if (code != MPI_SUCCESS || done != 0) {
      requests.clear();
      check(code, "MPI_Testall");
      break;
    }
    if (spin % 64 != 0) continue;
    std::this_thread::yield(); // a thread with work on this core (a sampler's) goes first
    if (shared.watch->cancelled()) {
      shared.broken = true;
      requests.clear(); // abandoned: the job ends
      throw PeerTimeout(fmt::format("rank {} stopped waiting for {}: the waits of its "
                                    "communicator were cancelled (the job is ending)",
                                    shared.rank, what));
    }
    waited = seconds_since(start);
    if (waited > answer_after) answer_pings(shared);
    if (waited > limit) time_out(shared, requests, peers, what, waited);
  }
  if (waited > answer_after) shared.watch->wait_ended(seconds_since(start), what);
}

class MpiPending final : public Pending {
public:
  MpiPending(std::shared_ptr<Shared> shared, std::vector<MPI_Request> requests,
             std::vector<int> peers, std::string what)
      : shared_(std::move(shared)), requests_(std::move(requests)), peers_(std::move(peers)),
        what_(std::move(what)) {}
  ~MpiPending() override {
    // A broken communicator's requests are abandoned: the job ends, and waiting could hang.
    if (!requests_.empty() && !shared_->broken)
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }
  void wait() override { watched_wait(*shared_, requests_, peers_, what_); }
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
  std::shared_ptr<Shared> shared_;
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;
  std::string what_;
};

class MpiCommunicator final : public Communicator {
public:
  /// Over a duplicate of `from`. Collective over `from`.
  explicit MpiCommunicator(MPI_Comm from) : shared_(std::make_shared<Shared>()) {
    TESSERA_MPI_CHECK(MPI_Comm_dup(from, &comm_));
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
    *shared_ = {comm_, rank_, size_, &peer_watch(), false};
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
    std::vector<int> peers(requests.size(), -1);
    return std::make_unique<MpiPending>(shared_, std::move(requests), std::move(peers),
                                        "a sum over all ranks (the gradient sum)");
  }

  std::vector<std::int64_t> alltoall(std::span<const std::int64_t> send) override {
    if (static_cast<int>(send.size()) != size_) {
      throw InvalidArgument(
          fmt::format("alltoall needs one value per rank ({}), got {}", size_, send.size()));
    }
    std::vector<std::int64_t> recv(send.size());
    MPI_Request request = MPI_REQUEST_NULL;
    TESSERA_MPI_CHECK(
        MPI_Ialltoall(send.data(), 1, MPI_INT64_T, recv.data(), 1, MPI_INT64_T, comm_, &request));
    wait_collective(request, "an all-to-all exchange");
    return recv;
  }

  void broadcast(std::vector<std::byte>& values, int root) override {
    std::int64_t count = static_cast<std::int64_t>(values.size());
    const std::string what = "a broadcast from rank " + std::to_string(root);
    MPI_Request request = MPI_REQUEST_NULL;
    TESSERA_MPI_CHECK(MPI_Ibcast(&count, 1, MPI_INT64_T, root, comm_, &request));
    wait_collective(request, what);
    values.resize(static_cast<std::size_t>(count));
    for (std::size_t at = 0; at < values.size(); at += kMaxPiece) {
      const auto piece = static_cast<int>(std::min(kMaxPiece, values.size() - at));
      TESSERA_MPI_CHECK(MPI_Ibcast(values.data() + at, piece, MPI_BYTE, root, comm_, &request));
      wait_collective(request, what);
    }
  }

  std::vector<double> allgather(double value) override {
    std::vector<double> all(static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    TESSERA_MPI_CHECK(
        MPI_Iallgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_, &request));
    wait_collective(request, "an all-gather");
    return all;
  }

  std::unique_ptr<Pending> start_exchange(std::span<const SendMessage> sends,
                                          std::span<const RecvMessage> recvs, int tag) override {
    std::vector<MPI_Request> requests;
    std::vector<int> peers;
    // Receives first, so a matching send finds its buffer posted.
    for (const RecvMessage& m : recvs) {
      for (std::size_t at = 0; at < m.data.size(); at += kMaxPiece) {
        const auto piece = static_cast<int>(std::min(kMaxPiece, m.data.size() - at));
        requests.emplace_back();
        peers.push_back(m.peer);
        TESSERA_MPI_CHECK(
            MPI_Irecv(m.data.data() + at, piece, MPI_BYTE, m.peer, tag, comm_, &requests.back()));
      }
    }
    for (const SendMessage& m : sends) {
      for (std::size_t at = 0; at < m.data.size(); at += kMaxPiece) {
        const auto piece = static_cast<int>(std::min(kMaxPiece, m.data.size() - at));
        requests.emplace_back();
        peers.push_back(m.peer);
        TESSERA_MPI_CHECK(
            MPI_Isend(m.data.data() + at, piece, MPI_BYTE, m.peer, tag, comm_, &requests.back()));
      }
    }
    return std::make_unique<MpiPending>(shared_, std::move(requests), std::move(peers),
                                        tags::describe(tag));
  }

  void send(std::span<const std::byte> data, int peer, int tag) override {
    const auto count = static_cast<std::int64_t>(data.size());
    std::vector<MPI_Request> requests(1);
    TESSERA_MPI_CHECK(MPI_Isend(&count, 1, MPI_INT64_T, peer, tag, comm_, &requests[0]));
    for (std::size_t at = 0; at < data.size(); at += kMaxPiece) {
      const auto piece = static_cast<int>(std::min(kMaxPiece, data.size() - at));
      requests.emplace_back();
      TESSERA_MPI_CHECK(
          MPI_Isend(data.data() + at, piece, MPI_BYTE, peer, tag, comm_, &requests.back()));
    }
    watched_wait(*shared_, requests, std::vector<int>(requests.size(), peer), tags::describe(tag));
  }

  std::vector<std::byte> receive(int peer, int tag) override {
    std::int64_t count = 0;
    std::vector<MPI_Request> requests(1);
    TESSERA_MPI_CHECK(MPI_Irecv(&count, 1, MPI_INT64_T, peer, tag, comm_, &requests[0]));
    watched_wait(*shared_, requests, {peer}, tags::describe(tag));
    std::vector<std::byte> data(static_cast<std::size_t>(count));
    for (std::size_t at = 0; at < data.size(); at += kMaxPiece) {
      const auto piece = static_cast<int>(std::min(kMaxPiece, data.size() - at));
      requests.emplace_back();
      TESSERA_MPI_CHECK(
          MPI_Irecv(data.data() + at, piece, MPI_BYTE, peer, tag, comm_, &requests.back()));
    }
    watched_wait(*shared_, requests, std::vector<int>(requests.size(), peer), tags::describe(tag));
    return data;
  }

  void barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    TESSERA_MPI_CHECK(MPI_Ibarrier(comm_, &request));
    wait_collective(request, "a barrier");
  }

  [[noreturn]] void abort(int code) noexcept override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort(); // MPI_Abort does not return; this satisfies [[noreturn]]
  }

  std::string describe() const override {
    return fmt::format("MPI ({} rank{})", size_, size_ == 1 ? "" : "s");
  }

  std::shared_ptr<Communicator> concurrent_duplicate() override {
    // Every rank's answer: all duplicate, or none does (a duplicate is collective).
    std::int64_t multiple = mpi_thread_multiple() ? 1 : 0;
    allreduce(&multiple, 1, MPI_INT64_T, MPI_SUM);
    if (multiple != size_) return nullptr;
    auto copy = std::make_shared<MpiCommunicator>(comm_);
    copy->peer_watch().set_limit(peer_watch().fixed_limit());
    return copy;
  }

private:
  void allreduce(void* data, std::size_t count, MPI_Datatype type, MPI_Op op) {
    if (count > static_cast<std::size_t>(INT_MAX)) {
      throw InvalidArgument(fmt::format("allreduce of {} values exceeds MPI's int count", count));
    }
    MPI_Request request = MPI_REQUEST_NULL;
    TESSERA_MPI_CHECK(
        MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, comm_, &request));
    wait_collective(request, "a sum over all ranks (allreduce)");
  }

  /// Waits for one collective request of every rank, watched.
  void wait_collective(MPI_Request request, const std::string& what) {
    std::vector<MPI_Request> requests{request};
    watched_wait(*shared_, requests, {-1}, what);
  }

  std::shared_ptr<Shared> shared_;
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
  TESSERA_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
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
  return std::make_shared<MpiCommunicator>(MPI_COMM_WORLD);
}

bool mpi_thread_multiple() noexcept {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return false;
  int level = MPI_THREAD_SINGLE;
  return MPI_Query_thread(&level) == MPI_SUCCESS && level >= MPI_THREAD_MULTIPLE;
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
