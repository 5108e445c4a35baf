// The chunk manager's mechanism: chunks mapped in and out of fixed device addresses, the pinned
// host tier, the trace of an epoch and the prefetch that reads it. The disk tier (disk_tier.cpp),
// the eviction policies (eviction.cpp), the allocator it hands out (managed_allocator.hpp) and
// the settings' text (offload_config.cpp) live beside it.
#include "tessera/engine/chunk_manager.hpp"

#include "disk_tier.hpp"
#include "eviction.hpp"
#include "managed_allocator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

namespace tessera {

namespace {

constexpr std::size_t kAlignment = 64; // every tensor starts on a cache line
constexpr std::size_t kDefaultReservation = std::size_t{1} << 40;
// Slots the device tier tracks at most (64 TiB of 64 MiB chunks). The free list holds every slot,
// so without a budget no chunk is ever evicted for want of one.
constexpr std::size_t kMaxSlots = std::size_t{1} << 20;

struct Tensor {
  std::string name;
  TensorKind kind;
  std::size_t offset; // in the address space
  std::size_t bytes;
  bool live;
  bool dead = false; // discarded and not written since
};

/// Where a chunk's bytes are. The device copy, when mapped, is the newest unless `dirty` is
/// false, in which case the host or disk copy marked valid holds the same bytes.
struct Chunk {
  TensorKind kind = TensorKind::Activation;
  int live_tensors = 0;
  int slot = -1; // device slot mapped at the chunk's address, or -1
  int pins = 0;
  bool has_data = false; // written at least once (else nothing to copy anywhere)
  bool dirty = false;    // mapped, and newer than every other copy
  std::byte* host = nullptr;
  bool host_valid = false;
  std::int64_t disk_slot = -1;
  bool disk_valid = false;
  std::uint64_t last_use = 0;
  std::shared_ptr<Event> arrival; // the copy that brought it in, when not yet waited for
};

} // namespace

struct ChunkManager::State {
  std::unique_ptr<AddressSpace> space;
  std::size_t chunk = 0;          // bytes per chunk
  std::size_t region = 0;         // bytes of address space per kind
  std::size_t next[kTensorKinds]; // next free offset of each kind's region
  std::vector<Tensor> tensors;
  std::map<std::size_t, int> by_offset;          // tensor start offset -> id
  std::unordered_map<std::size_t, Chunk> chunks; // by index (offset / chunk)
  std::uint64_t kind_bytes[kTensorKinds] = {};

  // Device tier.
  std::vector<int> free_slots;
  int slots = 0;
  std::vector<std::size_t> resident; // chunk indices mapped now
  int pinned = 0;                    // chunks with pins > 0

  // Host tier.
  std::vector<std::byte*> free_host;
  std::size_t host_buffers = 0;     // allocated (in use or free)
  std::size_t host_limit = 0;       // 0: none
  std::vector<std::size_t> on_host; // chunk indices holding a host buffer

  std::unique_ptr<DiskTier> disk;

  std::unique_ptr<Eviction> eviction; // which resident chunk leaves

  // Trace and clock.
  std::uint64_t tick = 0;
  bool in_epoch = false;
  std::vector<std::size_t> recording;
  std::vector<std::size_t> trace;
  std::unordered_map<std::size_t, std::vector<std::uint64_t>> positions;
  std::uint64_t position = 0; // touches so far in this epoch
  Pins* scope = nullptr;      // where allocate() acquires new tensors
  int epochs_begun = 0;
  std::vector<int> loose; // tensors allocated outside a scope, acquired until needed
};

ChunkManager::ChunkManager(BackendPtr backend, OffloadConfig config)
    : state_(std::make_unique<State>()), backend_(std::move(backend)), config_(std::move(config)) {
  State& s = *state_;
  const std::size_t granularity = backend_->address_granularity();
  if (config_.chunk_bytes == 0 || config_.chunk_bytes % granularity != 0) {
    throw InvalidArgument("chunk size " + format_bytes(config_.chunk_bytes) +
                          " is not a positive multiple of the " + backend_->describe() +
                          " backend's mapping granularity (" + format_bytes(granularity) + ")");
  }
  s.chunk = config_.chunk_bytes;
  const std::size_t reservation =
      config_.address_space_bytes != 0 ? config_.address_space_bytes : kDefaultReservation;
  s.region = reservation / kTensorKinds / s.chunk * s.chunk;
  if (s.region == 0) {
    throw InvalidArgument("address space of " + format_bytes(reservation) +
                          " cannot hold one chunk per tensor kind");
  }
  if (budgeted()) {
    if (config_.device_bytes < s.chunk) {
      throw InvalidArgument("device memory budget " + format_bytes(config_.device_bytes) +
                            " is smaller than one chunk (chunk size " + format_bytes(s.chunk) +
                            ")");
    }
    s.slots = static_cast<int>(std::min<std::size_t>(config_.device_bytes / s.chunk, kMaxSlots));
  } else {
    s.slots = static_cast<int>(std::min<std::size_t>(s.region / s.chunk * kTensorKinds, kMaxSlots));
  }
  if (config_.host_bytes != 0) {
    if (config_.host_bytes < s.chunk) {
      throw InvalidArgument("host memory budget " + format_bytes(config_.host_bytes) +
                            " is smaller than one chunk (chunk size " + format_bytes(s.chunk) +
                            ")");
    }
    s.host_limit = config_.host_bytes / s.chunk;
  }
  s.disk = std::make_unique<DiskTier>(config_.offload_dir, config_.rank, s.chunk,
                                      config_.fail_disk_writes_after);
  s.eviction = make_eviction(config_.policy);
  s.space = backend_->reserve_address_space(s.region * kTensorKinds, s.chunk, s.slots);
  for (int k = 0; k < kTensorKinds; ++k)
    s.next[k] = static_cast<std::size_t>(k) * s.region;
  s.free_slots.reserve(static_cast<std::size_t>(s.slots));
  for (int slot = s.slots - 1; slot >= 0; --slot)
    s.free_slots.push_back(slot);
}

ChunkManager::~ChunkManager() {
  State& s = *state_;
  try {
    backend_->synchronize();
  } catch (...) { // destructors never throw; the memory goes either way
  }
  for (auto& [index, chunk] : s.chunks) {
    if (chunk.host != nullptr) s.free_host.push_back(chunk.host);
  }
  for (std::byte* buffer : s.free_host)
    backend_->deallocate_pinned(buffer, s.chunk);
  s.disk.reset();
  s.space.reset();
}

// ---- Mechanism -----------------------------------------------------------------------------

class ChunkMover final : public ChunkUses {
public:
  ChunkMover(ChunkManager::State& s, const Backend& backend, const OffloadConfig& config,
             OffloadStats& epoch, OffloadStats& total)
      : s_(s), backend_(backend), config_(config), epoch_(epoch), total_(total) {}

  /// When chunk `c` is next touched: its first position in the trace from the current one on
  /// (wrapping into the next epoch), kNeverUsed when the trace never touches it.
  std::uint64_t last_use(std::size_t c) const override { return s_.chunks.at(c).last_use; }
  bool trace_known() const override { return !s_.trace.empty(); }
  std::uint64_t next_use(std::size_t c) const override {
    auto it = s_.positions.find(c);
    if (it == s_.positions.end()) return kNeverUsed;
    const auto& p = it->second;
    // The touch at `position` is the next one: in acquire() the chunk being brought in (never a
    // victim), in a prefetch the chunk needed first.
    auto after = std::lower_bound(p.begin(), p.end(), s_.position);
    return after != p.end() ? *after : s_.trace.size() + p.front();
  }

  /// The victim among `candidates` the policy picks (a chunk holding nothing first: it costs no
  /// move); skips `keep`. Returns false when there is none.
  bool choose(const std::vector<std::size_t>& candidates, std::size_t keep, bool pinned_ok,
              std::size_t& victim, std::uint64_t& victim_next) const {
    bool found = false;
    std::uint64_t best = 0;
    for (std::size_t c : candidates) {
      const Chunk& chunk = s_.chunks.at(c);
      if (c == keep || (!pinned_ok && chunk.pins > 0)) continue;
      // Score: larger is a better victim.
      const std::uint64_t score = !chunk.has_data ? kNeverUsed : s_.eviction->score(c, *this);
      if (!found || score > best) {
        found = true;
        best = score;
        victim = c;
      }
    }
    victim_next = best;
    return found;
  }

  void bump_peaks() {
    const std::uint64_t device = static_cast<std::uint64_t>(s_.resident.size()) * s_.chunk;
    const std::uint64_t host = static_cast<std::uint64_t>(s_.host_buffers) * s_.chunk;
    const std::uint64_t disk = static_cast<std::uint64_t>(s_.disk->slots()) * s_.chunk;
    for (OffloadStats* st : {&epoch_, &total_}) {
      st->peak_device_bytes = std::max(st->peak_device_bytes, device);
      st->peak_host_bytes = std::max(st->peak_host_bytes, host);
      st->peak_disk_bytes = std::max(st->peak_disk_bytes, disk);
    }
  }

  template <typename F> void count(F f) {
    f(epoch_);
    f(total_);
  }

  // -- Disk tier --------------------------------------------------------------------------

  void write_to_disk(std::size_t c, Chunk& chunk) {
    s_.disk->write(chunk.disk_slot, c, chunk.host, format_bytes(config_.host_bytes));
    bump_peaks();
    chunk.disk_valid = true;
    count([&](OffloadStats& st) { st.host_to_disk_bytes += s_.chunk; });
  }

  void read_from_disk(std::size_t c, Chunk& chunk) {
    s_.disk->read(chunk.disk_slot, c, chunk.host);
    chunk.host_valid = true;
    count([&](OffloadStats& st) { st.disk_to_host_bytes += s_.chunk; });
  }

  // -- Host tier --------------------------------------------------------------------------

  /// A host buffer for chunk `c`, making room in the host tier (and writing to disk) if needed.
  void give_host_buffer(std::size_t c, Chunk& chunk) {
    if (chunk.host != nullptr) return;
    if (!s_.free_host.empty()) {
      chunk.host = s_.free_host.back();
      s_.free_host.pop_back();
    } else if (s_.host_limit == 0 || s_.host_buffers < s_.host_limit) {
      chunk.host = static_cast<std::byte*>(backend_.allocate_pinned(s_.chunk));
      ++s_.host_buffers;
      bump_peaks();
    } else {
      chunk.host = take_host_buffer(c);
    }
    s_.on_host.push_back(c);
  }

  /// Frees a host buffer held by another chunk: a stale copy first, then one whose bytes are
  /// also elsewhere (mapped on the device, or on disk), then the policy's victim (written to
  /// disk).
  std::byte* take_host_buffer(std::size_t keep) {
    std::vector<std::size_t> cheap, costly;
    for (std::size_t c : s_.on_host) {
      if (c == keep) continue;
      const Chunk& chunk = s_.chunks.at(c);
      if (!chunk.host_valid) return release_host(c);
      (chunk.slot >= 0 || chunk.disk_valid ? cheap : costly).push_back(c);
    }
    std::size_t victim = 0;
    std::uint64_t next = 0;
    if (!choose(cheap, keep, true, victim, next) && !choose(costly, keep, true, victim, next)) {
      throw InvalidArgument("the host tier (host memory budget " +
                            format_bytes(config_.host_bytes) + ") cannot hold one more chunk of " +
                            format_bytes(s_.chunk));
    }
    Chunk& chunk = s_.chunks.at(victim);
    if (chunk.slot < 0 && !chunk.disk_valid) write_to_disk(victim, chunk);
    if (chunk.slot >= 0 && !chunk.disk_valid) chunk.dirty = true; // the device copy is the only one
    return release_host(victim);
  }

  std::byte* release_host(std::size_t c) {
    Chunk& chunk = s_.chunks.at(c);
    std::byte* buffer = chunk.host;
    chunk.host = nullptr;
    chunk.host_valid = false;
    std::erase(s_.on_host, c);
    return buffer;
  }

  // -- Device tier ------------------------------------------------------------------------

  void evict(std::size_t c) {
    Chunk& chunk = s_.chunks.at(c);
    Stopwatch timer;
    const bool only_copy =
        chunk.has_data && (chunk.dirty || (!chunk.host_valid && !chunk.disk_valid));
    if (only_copy) {
      give_host_buffer(c, chunk);
      backend_
          .copy_async(chunk.host, s_.space->base() + c * s_.chunk, s_.chunk,
                      CopyDirection::DeviceToHost)
          ->synchronize();
      chunk.host_valid = true;
      chunk.disk_valid = false;
      count([&](OffloadStats& st) { st.device_to_host_bytes += s_.chunk; });
    } else {
      backend_.record(Stream::Compute)->synchronize(); // kernels reading it have finished
      if (chunk.has_data) count([&](OffloadStats& st) { st.dropped_bytes += s_.chunk; });
    }
    s_.space->unmap(c * s_.chunk);
    s_.free_slots.push_back(chunk.slot);
    chunk.slot = -1;
    chunk.dirty = false;
    chunk.arrival.reset();
    std::erase(s_.resident, c);
    const double seconds = timer.seconds();
    count([&](OffloadStats& st) {
      ++st.evictions;
      st.stall_seconds += seconds;
    });
  }

  /// Maps chunk `c` on the device, evicting by policy. With `copy`, its bytes come in from the
  /// host or disk copy. Returns false (nothing done) when `only_if_farther` is set and every
  /// candidate victim is needed sooner than `c` (a prefetch that would hurt).
  bool bring_in(std::size_t c, bool copy, bool only_if_farther) {
    Chunk& chunk = s_.chunks.at(c);
    if (s_.free_slots.empty()) {
      std::size_t victim = 0;
      std::uint64_t victim_next = 0;
      if (!choose(s_.resident, c, false, victim, victim_next)) return false;
      if (only_if_farther && next_use(victim) <= next_use(c)) return false;
      evict(victim);
    }
    const int slot = s_.free_slots.back();
    s_.free_slots.pop_back();
    s_.space->map(c * s_.chunk, slot);
    chunk.slot = slot;
    s_.resident.push_back(c);
    bump_peaks();
    if (copy && chunk.has_data) {
      Stopwatch timer;
      if (!chunk.host_valid) {
        give_host_buffer(c, chunk);
        read_from_disk(c, chunk);
      }
      chunk.arrival = backend_.copy_async(s_.space->base() + c * s_.chunk, chunk.host, s_.chunk,
                                          CopyDirection::HostToDevice);
      const double seconds = timer.seconds();
      count([&](OffloadStats& st) {
        st.host_to_device_bytes += s_.chunk;
        st.stall_seconds += seconds;
      });
    }
    chunk.dirty = false;
    return true;
  }

private:
  ChunkManager::State& s_;
  const Backend& backend_;
  const OffloadConfig& config_;
  OffloadStats& epoch_;
  OffloadStats& total_;
};

namespace {

std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace

TensorSlot ChunkManager::allocate(std::string name, TensorKind kind, std::size_t bytes) {
  State& s = *state_;
  const int k = static_cast<int>(kind);
  const std::size_t begin = align_up(s.next[k], kAlignment);
  const std::size_t end = begin + std::max<std::size_t>(bytes, 1);
  if (end > static_cast<std::size_t>(k + 1) * s.region) {
    throw InvalidArgument("the chunk manager's address space for " + to_string(kind) +
                          " tensors (" + format_bytes(s.region) + ") cannot hold '" + name + "' (" +
                          format_bytes(bytes) + ")");
  }
  s.next[k] = end;
  const int id = static_cast<int>(s.tensors.size());
  for (std::size_t c = begin / s.chunk; c <= (end - 1) / s.chunk; ++c) {
    Chunk& chunk = s.chunks[c];
    chunk.kind = kind;
    ++chunk.live_tensors;
  }
  s.tensors.push_back(Tensor{std::move(name), kind, begin, bytes, true});
  s.by_offset[begin] = id;
  s.kind_bytes[k] += bytes;
  std::uint64_t live = 0;
  for (const std::uint64_t b : s.kind_bytes)
    live += b;
  for (OffloadStats* st : {&epoch_, &total_})
    st->peak_tensor_bytes = std::max(st->peak_tensor_bytes, live);
  if (!budgeted()) { // without a budget every chunk is on the device from its first tensor on
    ChunkMover mover(s, *backend_, config_, epoch_, total_);
    for (std::size_t c = begin / s.chunk; c <= (end - 1) / s.chunk; ++c) {
      if (s.chunks.at(c).slot < 0) mover.bring_in(c, false, false);
    }
  }
  const std::size_t span = (end - 1) / s.chunk - begin / s.chunk + 1;
  if (budgeted() && bytes > 0 && s.scope != nullptr) {
    acquire(id, Access::ReadWrite);
    s.scope->adopt(id, {s.space->base() + begin, bytes});
  } else if (budgeted() && bytes > 0 && span <= static_cast<std::size_t>(s.slots)) {
    // Outside a scope it is acquired when the pinned chunks leave room (a constructor writes
    // it next: zeros, initial weights); otherwise whoever touches it acquires it first.
    try {
      acquire(id, Access::ReadWrite);
      s.loose.push_back(id);
    } catch (const InvalidArgument&) {
    }
  }
  return {id, s.space->base() + begin, bytes};
}

Pins* ChunkManager::scope() const noexcept {
  return state_->scope;
}

Pins* ChunkManager::set_scope(Pins* scope) noexcept {
  Pins* previous = state_->scope;
  state_->scope = scope;
  return previous;
}

ChunkManager* manager_of(const BackendPtr& backend) noexcept {
  const auto* managed = dynamic_cast<const ManagedAllocator*>(backend.get());
  return managed != nullptr ? &managed->manager() : nullptr;
}

BackendPtr memory_for(const BackendPtr& backend, TensorKind kind) {
  ChunkManager* manager = manager_of(backend);
  return manager != nullptr ? manager->allocator(kind) : backend;
}

void ChunkManager::free(int id) noexcept {
  State& s = *state_;
  if (id < 0 || id >= static_cast<int>(s.tensors.size()) || !s.tensors[id].live) return;
  Tensor& t = s.tensors[id];
  t.live = false;
  s.by_offset.erase(t.offset);
  s.kind_bytes[static_cast<int>(t.kind)] -= t.bytes;
  const std::size_t end = t.offset + std::max<std::size_t>(t.bytes, 1);
  for (std::size_t c = t.offset / s.chunk; c <= (end - 1) / s.chunk; ++c) {
    auto it = s.chunks.find(c);
    if (it == s.chunks.end() || --it->second.live_tensors > 0) continue;
    Chunk& chunk = it->second;
    try {
      if (chunk.slot >= 0) {
        backend_->synchronize(); // kernels queued on it finish before the slot is reused
        s.space->unmap(c * s.chunk);
        s.free_slots.push_back(chunk.slot);
        std::erase(s.resident, c);
      }
    } catch (...) { // an unmap that fails leaves the slot mapped; never throw from free
    }
    if (chunk.pins > 0) --s.pinned;
    if (chunk.host != nullptr) {
      s.free_host.push_back(chunk.host);
      std::erase(s.on_host, c);
    }
    s.disk->release(chunk.disk_slot);
    s.chunks.erase(it);
  }
}

int ChunkManager::find(const void* address) const noexcept {
  const State& s = *state_;
  const auto* p = static_cast<const std::byte*>(address);
  if (p < s.space->base() || p >= s.space->base() + s.space->size()) return -1;
  const std::size_t offset = static_cast<std::size_t>(p - s.space->base());
  auto it = s.by_offset.upper_bound(offset);
  if (it == s.by_offset.begin()) return -1;
  --it;
  const Tensor& t = s.tensors[it->second];
  return offset < t.offset + std::max<std::size_t>(t.bytes, 1) ? it->second : -1;
}

const std::string& ChunkManager::name(int id) const {
  return state_->tensors.at(id).name;
}

std::size_t ChunkManager::tensor_size(const void* address) const noexcept {
  const int id = find(address);
  return id < 0 ? 0 : state_->tensors[static_cast<std::size_t>(id)].bytes;
}

std::size_t ChunkManager::bytes_to_chunk_end(const void* address) const noexcept {
  const State& s = *state_;
  const auto* p = static_cast<const std::byte*>(address);
  if (p < s.space->base() || p >= s.space->base() + s.space->size()) {
    return std::numeric_limits<std::size_t>::max();
  }
  return s.chunk - static_cast<std::size_t>(p - s.space->base()) % s.chunk;
}

int ChunkManager::device_slots() const noexcept {
  return state_->slots;
}
std::size_t ChunkManager::chunks() const noexcept {
  return state_->chunks.size();
}
std::uint64_t ChunkManager::tensor_bytes(TensorKind kind) const noexcept {
  return state_->kind_bytes[static_cast<int>(kind)];
}

BackendPtr ChunkManager::allocator(TensorKind kind) {
  return std::make_shared<ManagedAllocator>(*this, kind);
}

std::byte* ChunkManager::acquire(int id, Access access, std::size_t offset, std::size_t bytes) {
  State& s = *state_;
  const Tensor& t = s.tensors.at(id);
  if (!t.live) throw InvalidArgument("chunk manager: tensor '" + t.name + "' was freed");
  offset = std::min(offset, t.bytes);
  bytes = std::min(bytes, t.bytes - offset);
  std::byte* data = s.space->base() + t.offset + offset;
  if (bytes == 0) return data;
  const std::size_t begin = t.offset + offset, end = begin + bytes;
  const std::size_t first = begin / s.chunk, last = (end - 1) / s.chunk;

  const auto unpinned_needed = [&] {
    int more = 0; // chunks this call pins that are not pinned yet
    for (std::size_t c = first; c <= last; ++c)
      more += s.chunks.at(c).pins == 0 ? 1 : 0;
    return more;
  };
  check_fits(id, offset, bytes);
  if (access != Access::Read) s.tensors[static_cast<std::size_t>(id)].dead = false;
  int more = unpinned_needed();
  // Tensors allocated outside a scope stay acquired only until the room is needed, oldest first.
  while (s.pinned + more > s.slots && !s.loose.empty()) {
    release(s.loose.front());
    s.loose.erase(s.loose.begin());
    more = unpinned_needed();
  }
  if (s.pinned + more > s.slots) {
    throw InvalidArgument(
        "the device memory budget (" + format_bytes(config_.device_bytes) + ", " +
        std::to_string(s.slots) + " chunks) cannot hold what is needed at once: " +
        std::to_string(s.pinned) + " chunks are pinned and '" + t.name + "' needs " +
        std::to_string(more) + " more; give a larger device memory budget or a smaller chunk size");
  }

  ChunkMover mover(s, *backend_, config_, epoch_, total_);
  for (std::size_t c = first; c <= last; ++c) {
    Chunk& chunk = s.chunks.at(c);
    const bool covered =
        access == Access::Write && begin <= c * s.chunk && end >= (c + 1) * s.chunk;
    if (s.in_epoch) s.recording.push_back(c);
    const bool hit = chunk.slot >= 0;
    mover.count([&](OffloadStats& st) {
      ++st.acquires;
      ++(hit ? st.hits : st.misses);
      if (chunk.kind == TensorKind::Input) ++(hit ? st.input_hits : st.input_misses);
    });
    if (!hit) mover.bring_in(c, !covered, false);
    if (chunk.arrival) {
      backend_->wait(Stream::Compute, *chunk.arrival);
      chunk.arrival.reset();
    }
    if (chunk.pins++ == 0) ++s.pinned;
    chunk.last_use = ++s.tick;
    if (access != Access::Read) {
      chunk.has_data = true;
      chunk.dirty = true;
      chunk.host_valid = false;
      chunk.disk_valid = false;
    }
    ++s.position;
  }
  prefetch();
  return data;
}

void ChunkManager::release(int id, std::size_t offset, std::size_t bytes) {
  State& s = *state_;
  if (id < 0 || id >= static_cast<int>(s.tensors.size())) return;
  const Tensor& t = s.tensors[id]; // perhaps freed since: its chunks that live are released
  offset = std::min(offset, t.bytes);
  bytes = std::min(bytes, t.bytes - offset);
  if (bytes == 0) return;
  const std::size_t begin = t.offset + offset, end = begin + bytes;
  for (std::size_t c = begin / s.chunk; c <= (end - 1) / s.chunk; ++c) {
    auto it = s.chunks.find(c);
    if (it == s.chunks.end() || it->second.pins == 0) continue;
    if (--it->second.pins == 0) --s.pinned;
  }
}

void ChunkManager::check_fits(int id, std::size_t offset, std::size_t bytes) const {
  const State& s = *state_;
  const Tensor& t = s.tensors.at(id);
  offset = std::min(offset, t.bytes);
  bytes = std::min(bytes, t.bytes - offset);
  if (!budgeted() || bytes == 0) return;
  const std::size_t begin = t.offset + offset;
  const std::size_t span = (begin + bytes - 1) / s.chunk - begin / s.chunk + 1;
  if (span <= static_cast<std::size_t>(s.slots)) return;
  throw InvalidArgument("tensor '" + t.name + "' (" + format_bytes(bytes) + " in " +
                        std::to_string(span) + " chunks of " + format_bytes(s.chunk) +
                        ") cannot fit in the device memory budget (" +
                        format_bytes(config_.device_bytes) + ", " + std::to_string(s.slots) +
                        " chunks) at once: give a larger device memory budget or a smaller "
                        "chunk size");
}

std::vector<ChunkManager::Part> ChunkManager::parts(const void* address, std::size_t bytes) const {
  const State& s = *state_;
  std::vector<Part> result;
  const auto* p = static_cast<const std::byte*>(address);
  if (bytes == 0 || p < s.space->base() || p >= s.space->base() + s.space->size()) return result;
  const std::size_t begin = static_cast<std::size_t>(p - s.space->base()), end = begin + bytes;
  auto it = s.by_offset.upper_bound(begin);
  if (it != s.by_offset.begin()) --it;
  for (; it != s.by_offset.end() && it->first < end; ++it) {
    const Tensor& t = s.tensors[it->second];
    const std::size_t from = std::max(begin, t.offset), to = std::min(end, t.offset + t.bytes);
    if (from < to) result.push_back({it->second, from - t.offset, to - from});
  }
  return result;
}

// ---- Policy: the trace ---------------------------------------------------------------------

bool ChunkManager::prefetch_next(ChunkMover& mover, std::uint64_t horizon) {
  State& s = *state_;
  for (std::uint64_t i = s.position; i < s.trace.size() && i < horizon; ++i) {
    const std::size_t c = s.trace[i];
    auto it = s.chunks.find(c);
    if (it == s.chunks.end() || it->second.slot >= 0) continue;
    if (!mover.bring_in(c, true, true)) return false;
    mover.count([](OffloadStats& st) { ++st.prefetches; });
    return true;
  }
  return false;
}

void ChunkManager::prefetch() {
  State& s = *state_;
  if (!budgeted() || s.trace.empty() || config_.prefetch_depth <= 0) return;
  ChunkMover mover(s, *backend_, config_, epoch_, total_);
  const std::uint64_t horizon = s.position + 4 * static_cast<std::uint64_t>(config_.prefetch_depth);
  for (int fetched = 0; fetched < config_.prefetch_depth && prefetch_next(mover, horizon);) {
    ++fetched;
  }
}

bool ChunkManager::work_ahead() {
  State& s = *state_;
  if (!budgeted() || s.trace.empty()) return false;
  ChunkMover mover(s, *backend_, config_, epoch_, total_);
  const double stalled = epoch_.stall_seconds;
  if (!prefetch_next(mover, s.position + static_cast<std::uint64_t>(s.slots))) return false;
  const double copying = epoch_.stall_seconds - stalled; // idle time, not a stall
  mover.count([&](OffloadStats& st) {
    ++st.wait_prefetches;
    st.stall_seconds -= copying;
    st.wait_copy_seconds += copying;
  });
  return true;
}

void ChunkManager::discard(const void* address, std::size_t bytes) {
  State& s = *state_;
  for (const Part& part : parts(address, bytes)) {
    Tensor& t = s.tensors[static_cast<std::size_t>(part.id)];
    const bool transient = t.kind == TensorKind::Activation || t.kind == TensorKind::Gradient;
    if (!transient || part.bytes != t.bytes || t.bytes == 0) continue;
    t.dead = true;
    for (std::size_t c = t.offset / s.chunk; c <= (t.offset + t.bytes - 1) / s.chunk; ++c) {
      // The chunk is dropped when every live tensor in it is dead.
      const std::size_t from = c * s.chunk, to = from + s.chunk;
      auto it = s.by_offset.upper_bound(from);
      if (it != s.by_offset.begin()) --it;
      bool all_dead = true;
      for (; it != s.by_offset.end() && it->first < to && all_dead; ++it) {
        const Tensor& other = s.tensors[static_cast<std::size_t>(it->second)];
        if (other.offset + std::max<std::size_t>(other.bytes, 1) > from) all_dead = other.dead;
      }
      Chunk& chunk = s.chunks.at(c);
      if (!all_dead || !chunk.has_data) continue;
      if (chunk.arrival) { // a copy still reading the host buffer finishes before it is reused
        chunk.arrival->synchronize();
        chunk.arrival.reset();
      }
      chunk.has_data = false;
      chunk.dirty = false;
      if (chunk.host != nullptr) {
        s.free_host.push_back(chunk.host);
        std::erase(s.on_host, c);
        chunk.host = nullptr;
      }
      chunk.host_valid = false;
      s.disk->release(chunk.disk_slot);
      chunk.disk_slot = -1;
      chunk.disk_valid = false;
    }
  }
}

void ChunkManager::settle() noexcept {
  State& s = *state_;
  for (int id : s.loose)
    release(id);
  s.loose.clear();
}

void ChunkManager::begin_epoch() {
  State& s = *state_;
  settle();
  // The first epoch allocates (its chunk order differs from the steady one); the second records.
  s.in_epoch = budgeted() && s.trace.empty() && ++s.epochs_begun >= 2;
  s.recording.clear();
  s.position = 0;
  epoch_ = OffloadStats{};
  ChunkMover(s, *backend_, config_, epoch_, total_).bump_peaks();
}

OffloadStats ChunkManager::end_epoch() {
  State& s = *state_;
  if (s.in_epoch && s.trace.empty()) {
    s.trace = std::move(s.recording);
    for (std::size_t i = 0; i < s.trace.size(); ++i)
      s.positions[s.trace[i]].push_back(i);
  }
  s.in_epoch = false;
  s.recording.clear();
  return epoch_;
}

// ---- Pins ----------------------------------------------------------------------------------

void Pins::add(const void* data, std::size_t bytes, Access access) {
  if (manager_ == nullptr || bytes == 0) return;
  for (const ChunkManager::Part& part : manager_->parts(data, bytes)) {
    manager_->acquire(part.id, access, part.offset, part.bytes);
    held_.push_back({part.id, part.offset, part.bytes});
  }
}

void Pins::add_tensor(const void* data, Access access) {
  if (manager_ == nullptr || data == nullptr) return;
  const int id = manager_->find(data);
  if (id < 0) return;
  manager_->acquire(id, access);
  held_.push_back({id, 0, std::numeric_limits<std::size_t>::max()});
}

void Pins::adopt(int id, ByteRange range) {
  held_.push_back({id, 0, range.bytes});
  allocated_.push_back(range);
}

void Pins::clear() noexcept {
  if (manager_ != nullptr) {
    for (const Held& h : held_)
      manager_->release(h.id, h.offset, h.bytes);
  }
  held_.clear();
}

} // namespace tessera
