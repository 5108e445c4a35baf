// The chunk manager: every tensor of a run packed into fixed-size chunks that move between a
// budgeted device tier, a host tier and a disk tier while keeping their device addresses.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

class ChunkMover;
class Pins;

/// What a tensor holds; decides which chunks it shares and whether an evicted copy must be
/// written back.
enum class TensorKind {
  Input,          ///< input features: written once, then read
  Matrix,         ///< sparse matrices (Â and the like): written once, then read
  Activation,     ///< layer outputs kept for the backward pass
  Gradient,       ///< gradients of activations
  Weight,         ///< trainable parameters
  WeightGrad,     ///< their gradients (adjacent in memory, so data-parallel buckets need no copy)
  OptimizerState, ///< Adam's moments and the like
};
inline constexpr int kTensorKinds = 7;

/// "input", "matrix", "activation", "gradient", "weight", "weight-grad", "optimizer-state".
std::string to_string(TensorKind kind);
/// What an acquire does to the bytes: Read leaves them clean; Write and ReadWrite make the device
/// copy the only valid one. Write promises to overwrite the whole range, so a chunk the range
/// covers entirely is not copied in.
enum class Access { Read, Write, ReadWrite };

/// Which resident, unpinned chunk leaves the device (or host) when another must come in.
enum class EvictionPolicy {
  Lru,            ///< least recently used
  FarthestNextUse ///< Belady: the one whose next use in the recorded epoch trace is farthest
};
/// "lru" or "farthest-next-use"; parse throws InvalidArgument naming the valid values.
std::string to_string(EvictionPolicy policy);
EvictionPolicy parse_eviction_policy(const std::string& text);

/// Sizes and places of the tiers. A budget of 0 means none: with no device budget every chunk
/// stays on the device (nothing moves; the run is today's in-memory run).
struct OffloadConfig {
  std::size_t chunk_bytes = std::size_t{64} << 20; ///< chunk size; a multiple of the backend's
                                                   ///< address granularity
  std::size_t device_bytes = 0; ///< device memory budget: the device tier's hard budget
  std::size_t host_bytes = 0;   ///< host memory budget: the host tier's (pinned memory)
  std::string offload_dir;      ///< offload folder: the disk tier's (one file per rank)
  EvictionPolicy policy = EvictionPolicy::FarthestNextUse;
  int prefetch_depth = 2; ///< chunks of the recorded trace brought in ahead of their use
  int rank = 0;           ///< names the disk tier's file
  /// Virtual bytes reserved for all tensors (the sum of every tensor's bytes must fit); 0 picks
  /// 1 TiB (address space only: no memory is committed for it).
  std::size_t address_space_bytes = 0;
  /// Testing: a write to the disk tier past this many bytes in total comes up short, as on a
  /// full disk.
  std::uint64_t fail_disk_writes_after = std::numeric_limits<std::uint64_t>::max();
};

/// "1.5 GiB", "64 MiB", "512 B".
std::string format_bytes(std::uint64_t bytes);

/// What the tiers did over one epoch (ChunkManager::end_epoch) or a whole run.
struct OffloadStats {
  std::uint64_t acquires = 0;                     ///< chunk touches by acquire()
  std::uint64_t hits = 0;                         ///< touches of a chunk already on the device
  std::uint64_t misses = 0;                       ///< touches that had to bring the chunk in
  std::uint64_t input_hits = 0, input_misses = 0; ///< the same for Input chunks (feature cache)
  std::uint64_t evictions = 0;                    ///< chunks that left the device
  std::uint64_t prefetches = 0;                   ///< chunks brought in ahead of use
  std::uint64_t wait_prefetches = 0; ///< of those, brought in while the rank waited on messages
  std::uint64_t host_to_device_bytes = 0, device_to_host_bytes = 0;
  std::uint64_t disk_to_host_bytes = 0, host_to_disk_bytes = 0;
  std::uint64_t dropped_bytes = 0; ///< clean device copies discarded instead of written back
  double stall_seconds = 0;        ///< time acquire() waited for copies
  double wait_copy_seconds = 0;    ///< copies made while waiting on messages (no stall)
  std::uint64_t peak_device_bytes = 0, peak_host_bytes = 0, peak_disk_bytes = 0;
  std::uint64_t peak_tensor_bytes = 0; ///< bytes of live tensors at most: the footprint

  /// Bytes moved between any two tiers.
  std::uint64_t moved_bytes() const noexcept {
    return host_to_device_bytes + device_to_host_bytes + disk_to_host_bytes + host_to_disk_bytes;
  }
  /// hits / acquires (1 when there were none), and the same for Input chunks.
  double hit_rate() const noexcept;
  double input_hit_rate() const noexcept;
};

/// A tensor the manager holds: its place in the device address space (stable for its life).
struct TensorSlot {
  int id = -1;
  std::byte* data = nullptr; ///< device address, valid while the tensor is acquired
  std::size_t bytes = 0;
};

/// Packs tensors into chunks and moves chunks between a device tier with a hard budget, a host
/// tier and a disk tier (PatrickStar's mechanism, ZeRO-Infinity's tiers). Each tensor has a fixed
/// device address for its whole life: a chunk leaving the device is unmapped (a stray touch
/// faults) and mapped back at the same address when acquired, so views stay valid across moves.
/// Kernels may touch a tensor only while it is acquired. Not thread-safe: one thread calls it.
///
/// Mechanism (map, copy, pin, prefetch, evict) is here; the policy is a choice among resident,
/// unpinned chunks (EvictionPolicy). The second epoch records the order in which chunks are
/// acquired (the first allocates, in an order of its own); later epochs evict the chunk whose next use in that trace is farthest and prefetch
/// the next chunks of the trace.
class ChunkManager {
public:
  /// Reserves the address space and the device slots (device_bytes / chunk_bytes of them).
  /// Throws InvalidArgument naming the chunk size or the budget for a chunk size that is not a
  /// multiple of the backend's granularity or a device budget smaller than one chunk, and IoError
  /// naming the folder when the disk tier's folder cannot hold files.
  ChunkManager(BackendPtr backend, OffloadConfig config);
  /// Frees every tier and removes the disk tier's file. Never throws.
  ~ChunkManager();
  ChunkManager(const ChunkManager&) = delete;
  ChunkManager& operator=(const ChunkManager&) = delete;

  /// Places a new tensor of `bytes` bytes after the last one of its kind (so tensors allocated in
  /// access order share chunks in that order). Its bytes are undefined until written. With a
  /// budget it is acquired at once: into the current scope (set_scope), or, outside one, until
  /// settle(), begin_epoch() or until another acquire needs the room (oldest first) — so the
  /// code that allocated it may initialize it before any scope exists. `name`
  /// appears in errors. Throws InvalidArgument when the address space is exhausted.
  TensorSlot allocate(std::string name, TensorKind kind, std::size_t bytes);
  /// Ends a tensor's life: a chunk whose tensors are all freed releases its memory in every tier.
  /// The tensor must not be acquired.
  void free(int id) noexcept;
  /// The tensor holding device address `address` (-1 when none).
  int find(const void* address) const noexcept;
  /// The tensor's name and bytes.
  const std::string& name(int id) const;
  /// Bytes of the live tensor holding `address` (0 for memory the manager does not hold).
  std::size_t tensor_size(const void* address) const noexcept;

  /// Brings the chunks that hold bytes [offset, offset + bytes) of tensor `id` (all of it by
  /// default) onto the device and pins them there until release() with the same arguments.
  /// Throws InvalidArgument naming the tensor and the budget when the chunks pinned at once
  /// would exceed the device budget, IoError naming the file when the disk tier fails.
  std::byte* acquire(int id, Access access, std::size_t offset = 0,
                     std::size_t bytes = std::numeric_limits<std::size_t>::max());
  /// Throws the InvalidArgument acquire() would (naming the tensor, the budget and the chunk
  /// size) when bytes [offset, offset + bytes) of tensor `id` span more chunks than the
  /// device budget holds.
  void check_fits(int id, std::size_t offset = 0,
                  std::size_t bytes = std::numeric_limits<std::size_t>::max()) const;
  void release(int id, std::size_t offset = 0,
               std::size_t bytes = std::numeric_limits<std::size_t>::max());
  /// The parts of live tensors inside [address, address + bytes): (tensor, offset, bytes) each,
  /// in address order (a range may span adjacent tensors, like a data-parallel bucket).
  struct Part {
    int id;
    std::size_t offset, bytes;
  };
  std::vector<Part> parts(const void* address, std::size_t bytes) const;
  /// Bytes from `address` to the end of its chunk; max() for memory the manager does not hold.
  std::size_t bytes_to_chunk_end(const void* address) const noexcept;

  /// Declares dead, until next written, the Activation and Gradient tensors that [address,
  /// address + bytes) covers whole (others, and tensors it covers in part, are left alone): what
  /// they hold is read by nobody, so a chunk whose live tensors are all dead keeps no copy — its
  /// host and disk copies are freed, it is the first to leave the device, without being written
  /// back, and it comes back without being copied in. Until rewritten, their bytes are undefined.
  void discard(const void* address, std::size_t bytes);

  /// Releases the tensors allocated outside a scope. Never throws.
  void settle() noexcept;

  /// Delimits a repeating unit of work (an epoch): the second one's chunk order (the first
  /// allocates, so its order is not the steady one) becomes the trace farthest-next-use and
  /// prefetch read; until then eviction is LRU. end_epoch returns the statistics of the epoch.
  void begin_epoch();
  OffloadStats end_epoch();
  /// One step of work ahead of the recorded trace, for time the rank would spend idle (a halo
  /// exchange's wait: the messages' timeline and the chunks' are the same epoch's): brings in
  /// the next chunk the trace needs that is not on the device — past the prefetch depth, as far
  /// as the next device_slots() touches — when that evicts nothing needed sooner. Its copy time
  /// counts as wait_copy_seconds, not as a stall. Returns false when nothing is worth doing.
  bool work_ahead();

  /// Statistics since construction.
  const OffloadStats& total() const noexcept { return total_; }

  /// The configuration, the backend, and whether a device budget is set.
  const OffloadConfig& config() const noexcept { return config_; }
  const BackendPtr& backend() const noexcept { return backend_; }
  bool budgeted() const noexcept { return config_.device_bytes != 0; }
  /// Device slots (chunks the device tier holds at once), chunks made so far, and bytes held by
  /// live tensors of `kind`.
  int device_slots() const noexcept;
  std::size_t chunks() const noexcept;
  std::uint64_t tensor_bytes(TensorKind kind) const noexcept;
  /// A backend that allocates Buffer memory of `kind` here (named "<kind> #n"), forwarding every
  /// other call to backend() (its target()); the manager must outlive the buffers.
  BackendPtr allocator(TensorKind kind);

  /// Makes `scope` the scope of new tensors: with a device budget, each tensor allocate() makes
  /// is acquired (ReadWrite) into it, so a module's fresh buffers are on the device for the call
  /// that made them. Returns the previous scope (nullptr for none).
  Pins* set_scope(Pins* scope) noexcept;
  /// The scope of new tensors (nullptr for none).
  Pins* scope() const noexcept;

private:
  friend class ChunkMover;
  struct State;
  /// Brings in the next chunks of the recorded trace that are not on the device, when a victim
  /// is needed later than they are.
  void prefetch();
  /// Brings in the first chunk at trace positions [position, horizon) not on the device, when a
  /// victim is needed later than it: whether one came in.
  bool prefetch_next(ChunkMover& mover, std::uint64_t horizon);

  std::unique_ptr<State> state_;
  BackendPtr backend_;
  OffloadConfig config_;
  OffloadStats epoch_, total_;
};

/// A range of device addresses: what Pins acquire.
struct ByteRange {
  const void* data = nullptr;
  std::size_t bytes = 0;
};

/// A scope's acquisitions, released when it ends (one layer's forward, one optimizer step).
class Pins {
public:
  /// manager may be nullptr: then nothing is acquired (memory the manager does not hold).
  explicit Pins(ChunkManager* manager) noexcept : manager_(manager) {}
  ~Pins() { clear(); }
  Pins(const Pins&) = delete;
  Pins& operator=(const Pins&) = delete;
  /// Acquires [data, data + bytes) (no-op without a manager, for empty ranges and for memory the
  /// manager does not hold).
  void add(const void* data, std::size_t bytes, Access access);
  void add(ByteRange range, Access access) { add(range.data, range.bytes, access); }
  /// Acquires the whole tensor that holds `data` (no-op as for add()).
  void add_tensor(const void* data, Access access);
  /// Acquires a dense view's elements (its rows are contiguous).
  template <typename T> void add_dense(ConstDenseView<T> x, Access access) {
    add(x.data, static_cast<std::size_t>(x.size()) * sizeof(T), access);
  }
  /// Acquires a CSR matrix's rows: its row_ptr entries, and its column and value tensors whole
  /// (which of their entries the rows use is known only from row_ptr).
  template <typename T> void add_csr(const CsrView<T>& s, Access values_access = Access::Read) {
    add(s.row_ptr, static_cast<std::size_t>(s.rows + 1) * sizeof(Offset), Access::Read);
    add_tensor(s.col, Access::Read);
    add_tensor(s.val, values_access);
  }
  /// Records tensor `id` the manager acquired whole into this scope (allocated in it).
  void adopt(int id, ByteRange range);
  /// The manager acquiring for this scope (nullptr: none).
  ChunkManager* manager() const noexcept { return manager_; }
  /// The tensors allocated while this was the manager's scope.
  const std::vector<ByteRange>& allocated() const noexcept { return allocated_; }
  /// Releases everything acquired so far. Never throws.
  void clear() noexcept;

private:
  struct Held {
    int id;
    std::size_t offset, bytes;
  };
  ChunkManager* manager_;
  std::vector<Held> held_; // by tensor id, so a tensor freed meanwhile still releases its chunks
  std::vector<ByteRange> allocated_;
};

/// Makes `pins` the manager's scope of new tensors until destroyed (see set_scope).
class AllocationScope {
public:
  AllocationScope(ChunkManager* manager, Pins& pins) noexcept : AllocationScope(manager, &pins) {}
  /// With pins == nullptr: no scope until destroyed (new tensors are acquired only until the
  /// room is needed, and may exceed the budget), e.g. while a module that acquires its own
  /// memory allocates.
  AllocationScope(ChunkManager* manager, Pins* pins) noexcept
      : manager_(manager), previous_(manager != nullptr ? manager->set_scope(pins) : nullptr) {}
  ~AllocationScope() {
    if (manager_ != nullptr) manager_->set_scope(previous_);
  }
  AllocationScope(const AllocationScope&) = delete;
  AllocationScope& operator=(const AllocationScope&) = delete;

private:
  ChunkManager* manager_;
  Pins* previous_;
};

/// The manager whose allocator `backend` is (ChunkManager::allocator), or nullptr for a plain
/// backend: how modules built on a backend find where their memory lives.
ChunkManager* manager_of(const BackendPtr& backend) noexcept;
/// The allocator of `kind` of the manager behind `backend`, or `backend` itself when it is plain:
/// weights, their gradients and optimizer state each get their own run of chunks.
BackendPtr memory_for(const BackendPtr& backend, TensorKind kind);

/// ChunkManager::discard of a view's bytes in the manager behind `backend` (no-op for a plain
/// backend): a module's buffer whose content no later call reads.
template <typename T> void discard(const BackendPtr& backend, ConstDenseView<T> x) {
  if (ChunkManager* manager = manager_of(backend); manager != nullptr)
    manager->discard(x.data, static_cast<std::size_t>(x.size()) * sizeof(T));
}
template <typename T> void discard(const BackendPtr& backend, DenseView<T> x) {
  discard(backend, ConstDenseView<T>(x));
}

} // namespace tessera
