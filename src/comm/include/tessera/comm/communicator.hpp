// Ranks and the messages between them: an abstract Communicator (collectives and split-phase
// point-to-point exchanges) and its MPI implementation, with an RAII MPI environment.
#pragma once

#include "tessera/comm/peer_watch.hpp"
#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera::comm {

/// One message of an exchange: the bytes to send to `peer`.
struct SendMessage {
  int peer = 0;                    ///< destination rank
  std::span<const std::byte> data; ///< host or (when accepted) device memory
};
/// One message of an exchange: where the bytes from `peer` land (it sends data.size() bytes).
struct RecvMessage {
  int peer = 0;              ///< source rank
  std::span<std::byte> data; ///< host or (when accepted) device memory
};

/// Messages in flight; wait() returns once every send buffer may be reused and every receive
/// buffer holds its data. Destroying a Pending that was not waited for waits (never throws).
class Pending {
public:
  virtual ~Pending() = default;
  /// Throws MpiError when a transfer failed. Stream-ordered transfers (NCCL) return at once.
  virtual void wait() = 0;
  /// Whether wait() would return at once, without blocking. Calling it also moves the transfers
  /// on: Open MPI progresses messages only inside MPI calls, so a caller that overlaps compute
  /// with messages in flight tests them now and then. Throws MpiError when a transfer failed.
  virtual bool test() = 0;
};

/// The ranks of one job. Collective calls must be made by every rank in the same order.
/// Not thread-safe: one thread (the main one) makes every call.
///
/// Waits on peers are watched (peer_watch()): a blocking call or Pending::wait that waits longer
/// than its limit throws PeerTimeout naming the rank waited for and the step; the communicator
/// is then unusable, and the job should end (abort()).
class Communicator {
public:
  virtual ~Communicator() = default;

  /// The watchdog of this rank's waits: its limit, where the job stands, the stalls so far. A
  /// communicator that wraps another shares that one's.
  virtual PeerWatch& peer_watch() { return watch_; }

  /// This rank, in [0, size()), and the number of ranks.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Rank and count among the ranks that share this node (MPI_COMM_TYPE_SHARED): which GPU
  /// of the node a rank takes.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  /// Element-wise sum over all ranks, in place. Collective. Throws InvalidArgument above 2^31 - 1
  /// values (MPI's int count). Through NCCL, a float sum of device memory is queued on the GPU
  /// stream and may still run when this returns; work queued after it sees the result.
  virtual void allreduce_sum(std::span<float> values) = 0;
  virtual void allreduce_sum(std::span<double> values) = 0;
  virtual void allreduce_sum(std::span<std::int64_t> values) = 0;
  /// Element-wise maximum over all ranks, in place. Collective.
  virtual void allreduce_max(std::span<double> values) = 0;

  /// Starts the element-wise sum over all ranks of `values`, in place, and returns at once (any
  /// count: MPI's int limit is handled by pieces). `values` must stay alive and untouched until
  /// the returned Pending's wait() (or test() is true). Collective: every rank starts its sums in
  /// the same order, and they may overlap other collectives and exchanges made after them.
  /// Through NCCL a sum of device memory is queued on the GPU stream (wait() returns at once;
  /// work queued after it sees the result); host memory goes through the MPI communicator.
  virtual std::unique_ptr<Pending> start_allreduce_sum(std::span<float> values) = 0;

  /// send: [size] one value per destination rank; returns [size] the value each rank sent here.
  /// Collective. Throws InvalidArgument when send does not hold size() values.
  virtual std::vector<std::int64_t> alltoall(std::span<const std::int64_t> send) = 0;

  /// Each rank gets `root`'s values of `values` (resized on non-root ranks by the root's count).
  /// Collective.
  virtual void broadcast(std::vector<std::byte>& values, int root) = 0;

  /// Every rank's `value`, in rank order. Collective.
  virtual std::vector<double> allgather(double value) = 0;

  /// Whether start_exchange and the reductions may be given device memory (NCCL, a CUDA-aware
  /// MPI); when not, callers stage device data through host buffers.
  virtual bool accepts_device_memory() const { return false; }

  /// Starts sending and receiving the given messages (tag separates concurrent exchanges;
  /// NCCL's device exchanges ignore it and match by call order); returns at once. Buffers must
  /// stay alive and untouched until wait(). Not collective: only the ranks named as peers take
  /// part, and each must post the matching message.
  virtual std::unique_ptr<Pending> start_exchange(std::span<const SendMessage> sends,
                                                  std::span<const RecvMessage> recvs, int tag) = 0;

  /// Blocking point-to-point transfer of one byte string of any length (used to hand out
  /// tiles): receive() returns what `peer` sent with `tag`. Host memory; not collective.
  virtual void send(std::span<const std::byte> data, int peer, int tag) = 0;
  virtual std::vector<std::byte> receive(int peer, int tag) = 0;

  /// Returns once every rank has called it. Collective.
  virtual void barrier() = 0;

  /// Ends the whole job at once with `code` (every rank exits; used when one rank fails). Not
  /// collective: any one rank may call it.
  [[noreturn]] virtual void abort(int code) noexcept = 0;

  /// "MPI (4 ranks)" and the like.
  virtual std::string describe() const = 0;

  /// A communicator over the same ranks (same rank numbers) whose messages never meet this
  /// one's, for another thread to use while this one is in use (each communicator stays on one
  /// thread): an MPI_Comm_dup when MPI runs at MPI_THREAD_MULTIPLE, nullptr on every rank when
  /// it does not. Its watch is its own, with this one's fixed limit. Host memory only (through
  /// NCCL: the host communicator's duplicate). Collective.
  virtual std::shared_ptr<Communicator> concurrent_duplicate() = 0;

private:
  PeerWatch watch_;
};

/// Initializes MPI (thread level MULTIPLE when the library gives it, so that a sampler thread can
/// exchange on a communicator of its own, Communicator::concurrent_duplicate; at least
/// FUNNELED: only the main thread calls MPI while OpenMP threads compute) and finalizes it when
/// destroyed. Throws MpiError when the library cannot give FUNNELED. When MPI is already
/// initialized it neither initializes nor finalizes. Every process of an MPI job makes one, before
/// any communicator; MPI_Finalize in the destructor is collective.
class MpiEnvironment {
public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

private:
  bool owns_ = false;
};

/// Every rank's `mine`, concatenated in rank order, on every rank (an allgatherv of trivially
/// copyable values: one broadcast per rank). Collective. Throws InvalidArgument for a message
/// that is not a whole number of values.
template <typename T> std::vector<T> all_gather(Communicator& comm, std::span<const T> mine) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<T> all;
  for (int root = 0; root < comm.size(); ++root) {
    std::vector<std::byte> piece;
    if (root == comm.rank()) {
      const std::span<const std::byte> bytes = std::as_bytes(mine);
      piece.assign(bytes.begin(), bytes.end());
    }
    comm.broadcast(piece, root);
    if (piece.size() % sizeof(T) != 0) {
      throw InvalidArgument("all_gather: rank " + std::to_string(root) + " sent " +
                            std::to_string(piece.size()) + " bytes, not a whole number of " +
                            std::to_string(sizeof(T)) + "-byte values");
    }
    const std::size_t before = all.size();
    all.resize(before + piece.size() / sizeof(T));
    if (!piece.empty()) std::memcpy(all.data() + before, piece.data(), piece.size());
  }
  return all;
}

/// Whether MPI runs at MPI_THREAD_MULTIPLE (concurrent_duplicate gives communicators); false
/// when MPI is not initialized.
bool mpi_thread_multiple() noexcept;

/// A communicator over a duplicate of MPI_COMM_WORLD; MPI errors come back as MpiError.
/// Collective over MPI_COMM_WORLD. Throws MpiError when MPI is not initialized.
std::shared_ptr<Communicator> make_mpi_communicator();

/// The communicator of a one-process job that never initializes MPI (no launcher, no plugins):
/// collectives return their input, and naming any peer throws InvalidArgument.
std::shared_ptr<Communicator> make_self_communicator();

/// Whether this build has NCCL (it comes with the CUDA backend when NCCL is found).
bool nccl_compiled() noexcept;

/// A communicator for a job whose ranks train on GPUs (`gpu` a CUDA backend) or CPUs (any other
/// backend). On a GPU rank: device-memory exchanges with other GPU ranks run through NCCL (one
/// communicator over the GPU ranks) on `gpu`'s stream (stream-ordered: wait() returns at once
/// and later kernels on that stream see the data); device messages to CPU ranks are staged
/// through host memory and go through `host` (copied out at start, in at wait()); float sums of
/// device memory run through NCCL when every rank has a GPU, else staged through `host`; host
/// memory and the other collectives go through `host`. A CPU rank (and every rank of a job
/// without a GPU) gets `host` itself. Collective over host's ranks (which ranks have GPUs is
/// gathered, and the NCCL id is broadcast from the first GPU rank). Throws NotCompiled without
/// NCCL, InvalidArgument for a null `gpu`.
std::shared_ptr<Communicator> make_nccl_communicator(std::shared_ptr<Communicator> host,
                                                     BackendPtr gpu);

/// A network link to simulate (--simulate-link GBPS[:LATENCY_US]).
struct LinkModel {
  double gigabits_per_second = 0; ///< each direction of each pair of ranks
  double latency_us = 0;          ///< per message, after its last byte left
};
/// "10 Gb/s, 5 µs latency".
std::string to_string(const LinkModel& link);

/// Time as the simulated link sees it: seconds on some steady clock, and a way to wait.
class LinkClock {
public:
  virtual ~LinkClock() = default;
  virtual double now() = 0;
  virtual void sleep_until(double seconds) = 0;
};
/// std::chrono::steady_clock and std::this_thread::sleep_until.
std::shared_ptr<LinkClock> steady_link_clock();

/// `inner`, with every message held back as a link of `link`'s speed would hold it (a
/// simulation for benchmarks and tests of the communication modes: these machines' ranks share
/// memory, so communication is otherwise nearly free). Each rank has one link out to and one in
/// from every peer: a message takes bytes / bandwidth on its link from when the link is free,
/// plus the latency, so one exchange's messages to a peer queue behind each other while messages
/// to different peers travel side by side. An exchange (and a blocking send or receive) is
/// complete once `inner` has moved the bytes and every message's simulated time has passed;
/// test() says false until then. Collectives take what a ring would: an allreduce of B bytes over
/// P ranks 2(P-1) latencies and 2(P-1)/P·B of transfer; a broadcast ⌈log2 P⌉ latencies and its
/// bytes once; the other collectives (small) 2(P-1) latencies. One rank: `inner` unchanged.
/// Throws InvalidArgument for a bandwidth ≤ 0 or a negative latency.
std::shared_ptr<Communicator> simulate_link(std::shared_ptr<Communicator> inner, LinkModel link,
                                            std::shared_ptr<LinkClock> clock = steady_link_clock());

/// What a short exchange measured of the link to one peer.
struct LinkEstimate {
  int peer = 0;
  double latency_us = 0;          ///< time of an exchange of 8 bytes each way
  double gigabits_per_second = 0; ///< of the extra bytes of a large exchange over a small one
};
/// Measures the link to each of `peers` (ascending, no duplicates; symmetric over the job: this
/// rank names p exactly when p names this rank): per peer, `rounds` exchanges of 8 bytes and of
/// `large_bytes` each way, the fastest of each (waiting only adds time: a peer that shares a core
/// with another rank answers late in some rounds, not in all), peers taken in ascending order (so
/// the pairs meet in one global order and no rank waits in a cycle). Times come from `clock` (the
/// steady clock by default; through simulate_link, pass its clock to measure the simulated link).
/// Collective over the ranks named. Throws InvalidArgument for peers out of order or naming
/// this rank or no rank.
std::vector<LinkEstimate> measure_links(Communicator& comm, std::span<const int> peers,
                                        LinkClock& clock, std::size_t large_bytes = 1 << 20,
                                        int rounds = 5);

/// Whether an MPI launcher (mpirun, srun with PMI/PMIx) started this process.
bool launched_by_mpi() noexcept;

/// This process's rank in MPI_COMM_WORLD, or 0 when MPI is not initialized; for error messages.
int world_rank() noexcept;

} // namespace tessera::comm
