// Data parallelism: the weight gradients of replicated parameters summed over the ranks in
// buckets, each allreduced as soon as backward has produced it, while the rest of backward runs.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/core/device.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/module.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera {

/// Neighbouring gradients closer than this many bytes share a bucket, the padding between them
/// summed with them (so it must hold zeros, as allocators that align tensors leave it).
inline constexpr std::size_t kBucketGapBytes = 64;

/// One bucket of plan_buckets: the ranges it holds, in address order, and the bytes it spans.
struct BucketPlan {
  std::vector<std::size_t> members; ///< indices into plan_buckets' `ranges`, by address
  const std::byte* begin = nullptr; ///< the first member's first byte (nullptr when empty)
  std::size_t bytes = 0;            ///< from begin to the last member's end, padding included
};

/// Groups memory ranges (begin, bytes) into buckets: runs of ranges that follow one another in
/// memory with gaps of fewer than kBucketGapBytes, each spanning at most `bucket_bytes` (a single
/// larger range is a bucket of its own). Ranges of zero bytes are buckets of their own with no
/// bytes. Buckets come in address order; the input order does not matter. Pure: reads no memory.
/// Throws InvalidArgument when bucket_bytes is 0 or two ranges overlap (naming both by index).
std::vector<BucketPlan> plan_buckets(std::vector<std::pair<const std::byte*, std::size_t>> ranges,
                                     std::size_t bucket_bytes);

/// Sums the gradients of a fixed set of parameters over the ranks as backward produces them.
/// Buckets are runs of parameters whose gradients are adjacent in memory (a gap of < 64 bytes of
/// padding between neighbours is allowed; the padding is summed too and must be zero), each at
/// most bucket_bytes (a single larger gradient is a bucket of its own): no packing copy. A
/// bucket's non-blocking allreduce starts as soon as all its gradients are ready.
///
/// Gradients on a device whose communicator cannot take device memory (MPI without CUDA
/// awareness) travel through a host copy of each bucket, made when the bucket starts. Not
/// thread-safe; the communicator, backend and parameters must outlive this object, and the
/// gradients keep the memory they have now.
class DataParallel {
public:
  /// Plans the buckets of `parameters`' gradients (all on `backend`): where the ranks' address
  /// layouts give different plans, every gradient is a bucket of its own. Collective (one small
  /// allreduce). Throws
  /// InvalidArgument for a null or repeated parameter, a gradient on another backend, bucket_bytes
  /// of 0, or gradients that overlap (naming their positions in `parameters`).
  DataParallel(comm::Communicator& comm, BackendPtr backend,
               std::vector<Parameter<float>*> parameters, std::size_t bucket_bytes = 25u << 20);
  /// Waits for the sums still in flight (never throws).
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// Backward has written p's gradient for this step (any order, the same on every rank). Starts
  /// the allreduce of p's bucket when it is complete; progresses the ones in flight. Collective in
  /// effect: every rank must mark the same parameters each step. Throws InvalidArgument, naming
  /// the parameter, for one not given to the constructor or marked twice in a step.
  void gradient_ready(const Parameter<float>& p);
  /// Starts the buckets not yet started, waits for all; then every gradient is the sum over
  /// ranks. Collective. Resets readiness for the next step.
  void finish();
  /// How many buckets the gradients form.
  std::size_t buckets() const noexcept { return buckets_.size(); }
  /// Seconds finish() spent waiting in the last step (the part of communication not hidden).
  double last_wait_seconds() const noexcept { return last_wait_seconds_; }

private:
  /// Where a parameter's gradient goes, and whether it was marked this step.
  struct Slot {
    std::size_t bucket = 0;
    bool ready = false;
  };
  struct Bucket {
    std::span<float> values;    ///< its gradients and the padding between them, on the backend
    std::vector<float> staging; ///< the host copy that travels, when the device's cannot
    std::size_t unready = 0;    ///< members not marked ready this step
    std::size_t members = 0;    ///< parameters in it
    std::unique_ptr<comm::Pending> pending; ///< the sum in flight; null before start
    std::unique_ptr<Pins> pins;             ///< its chunks, on the device while in flight
    bool started = false, done = false, summed = false;
  };

  /// Waits for bucket b's sum and puts it in place (from the staging copy when staged).
  void complete(std::size_t b);

  /// Starts bucket b's sum (copying it to the host first when staged).
  void start(std::size_t b);

  comm::Communicator& comm_;
  BackendPtr backend_;
  std::unordered_map<const Parameter<float>*, Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> start_order_; ///< buckets started this step, in order
  bool staged_ = false;                  ///< whether sums go through host copies
  ChunkManager* memory_ = nullptr;       ///< the gradients' manager, when they live in chunks
  std::size_t in_flight_bytes_ = 0;      ///< bytes of the buckets started and not completed
  double last_wait_seconds_ = 0.0;
};

} // namespace tessera
