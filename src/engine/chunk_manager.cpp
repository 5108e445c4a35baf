// The chunk manager: chunks mapped in and out of fixed device addresses, a pinned host tier and a
// disk tier, with LRU or farthest-next-use eviction over the recorded trace of an epoch.
#include "tessera/engine/chunk_manager.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/file_kind.hpp"
#include "tessera/core/timer.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

namespace tessera {

std::string to_string(TensorKind kind) {
  switch (kind) {
  case TensorKind::Input:
    return "input";
  case TensorKind::Matrix:
    return "matrix";
  case TensorKind::Activation:
    return "activation";
  case TensorKind::Gradient:
    return "gradient";
  case TensorKind::Weight:
    return "weight";
  case TensorKind::WeightGrad:
    return "weight-grad";
  case TensorKind::OptimizerState:
    return "optimizer-state";
  }
  return "unknown";
}

std::string to_string(EvictionPolicy policy) {
  return policy == EvictionPolicy::Lru ? "lru" : "farthest-next-use";
}

EvictionPolicy parse_eviction_policy(const std::string& text) {
  if (text == "lru") return EvictionPolicy::Lru;
  if (text == "farthest-next-use") return EvictionPolicy::FarthestNextUse;
  throw InvalidArgument("unknown eviction policy '" + text + "'; valid: lru, farthest-next-use");
}

std::size_t parse_byte_size(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return InvalidArgument(what + ": '" + text +
                           "' is not a byte size (a whole number with an optional unit K, M, G "
                           "or T, e.g. 512MiB or 2GiB)");
  };
  std::size_t end = 0;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9')
    ++end;
  if (end == 0 || end > 18) throw bad();
  const std::uint64_t number = std::stoull(text.substr(0, end));
  std::string unit = text.substr(end);
  if (unit.size() >= 2 && (unit.ends_with("iB") || unit.ends_with("ib"))) {
    unit = unit.substr(0, unit.size() - 2);
  } else if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b') && unit.size() == 2) {
    unit = unit.substr(0, 1);
  }
  int shift = 0;
  if (unit.empty() || unit == "B" || unit == "b")
    shift = 0;
  else if (unit == "K" || unit == "k")
    shift = 10;
  else if (unit == "M" || unit == "m")
    shift = 20;
  else if (unit == "G" || unit == "g")
    shift = 30;
  else if (unit == "T" || unit == "t")
    shift = 40;
  else
    throw bad();
  if (number > (std::numeric_limits<std::uint64_t>::max() >> shift)) throw bad();
  return static_cast<std::size_t>(number << shift);
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value == std::floor(value)) {
    std::snprintf(text, sizeof text, "%.0f %s", value, units[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  }
  return text;
}

double OffloadStats::hit_rate() const noexcept {
  return acquires == 0 ? 1.0 : static_cast<double>(hits) / static_cast<double>(acquires);
}

double OffloadStats::input_hit_rate() const noexcept {
  const std::uint64_t touches = input_hits + input_misses;
  return touches == 0 ? 1.0 : static_cast<double>(input_hits) / static_cast<double>(touches);
}

namespace {

constexpr std::size_t kAlignment = 64; // every tensor starts on a cache line
constexpr std::size_t kDefaultReservation = std::size_t{1} << 40;
// Slots the device tier tracks at most (64 TiB of 64 MiB chunks). The free list holds every slot,
// so without a budget no chunk is ever evicted for want of one.
constexpr std::size_t kMaxSlots = std::size_t{1} << 20;
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

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

std::string errno_text() {
  return std::strerror(errno);
}

/// Checks the disk tier's folder `dir`: a writable folder, created (with its missing parents,
/// listed in `made`, outermost first) when absent, as --checkpoint-dir is. Throws IoError naming
/// the flag, the folder and what it is otherwise.
void open_disk_folder(const std::string& dir, std::vector<std::string>& made) {
  const std::string flag = "--offload-dir " + dir + ": ";
  struct stat info {};
  if (stat(dir.c_str(), &info) != 0) {
    if (errno != ENOENT) throw IoError(flag + "cannot look at it (" + errno_text() + ")");
    std::vector<std::string> missing;
    for (std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
         !p.empty() && stat(p.c_str(), &info) != 0 && errno == ENOENT; p = p.parent_path()) {
      missing.push_back(p.string());
      if (p == p.parent_path()) break;
    }
    for (auto folder = missing.rbegin(); folder != missing.rend(); ++folder) {
      if (mkdir(folder->c_str(), 0777) != 0 && errno != EEXIST) {
        throw IoError(flag + "cannot create '" + *folder + "' (" + errno_text() + ")");
      }
      made.push_back(*folder);
    }
    if (stat(dir.c_str(), &info) != 0) {
      throw IoError(flag + "cannot look at it (" + errno_text() + ")");
    }
  }
  if (!S_ISDIR(info.st_mode)) {
    throw IoError(flag + "it is " + describe_file_kind(info.st_mode) + ", not a folder");
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    throw IoError(flag + "cannot write there (" + errno_text() + ")");
  }
}

/// Forwards every call to the backend it wraps, except that Buffer memory comes from a manager.
class ManagedAllocator final : public Backend {
public:
  ManagedAllocator(ChunkManager& manager, TensorKind kind)
      : manager_(manager), target_(*manager.backend()), kind_(kind) {}
  DeviceKind kind() const noexcept override { return target_.kind(); }
  int device_id() const noexcept override { return target_.device_id(); }
  int num_threads() const noexcept override { return target_.num_threads(); }
  void* allocate(std::size_t bytes) const override {
    const TensorSlot t =
        manager_.allocate(to_string(kind_) + " #" + std::to_string(++count_), kind_, bytes);
    try {
      // A buffer allocated in a scope is acquired whole there, so it must fit the device at
      // once; outside one (a module that acquires its own memory in blocks) it need not.
      if (manager_.scope() != nullptr) manager_.check_fits(t.id);
    } catch (...) {
      manager_.free(t.id);
      throw;
    }
    return t.data;
  }
  void deallocate(void* ptr, std::size_t) const noexcept override {
    manager_.free(manager_.find(ptr));
  }
  // Copies and zeroing through the allocator touch managed memory one chunk piece at a time,
  // each piece acquired for the call: setup code (a matrix copied in, a buffer zeroed) needs
  // no scope of its own and may fill a tensor of any size. Inside a scope the pieces are
  // already pinned and acquiring them again only counts.
  void copy_from_host(void* dst, const void* src, std::size_t bytes) const override {
    in_pieces(dst, nullptr, bytes, [&](std::size_t o, std::size_t n) {
      target_.copy_from_host(static_cast<std::byte*>(dst) + o,
                             static_cast<const std::byte*>(src) + o, n);
    });
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) const override {
    in_pieces(nullptr, src, bytes, [&](std::size_t o, std::size_t n) {
      target_.copy_to_host(static_cast<std::byte*>(dst) + o, static_cast<const std::byte*>(src) + o,
                           n);
    });
  }
  void copy_within(void* dst, const void* src, std::size_t bytes) const override {
    in_pieces(dst, src, bytes, [&](std::size_t o, std::size_t n) {
      target_.copy_within(static_cast<std::byte*>(dst) + o, static_cast<const std::byte*>(src) + o,
                          n);
    });
  }
  void zero_bytes(void* dst, std::size_t bytes) const override {
    in_pieces(dst, nullptr, bytes, [&](std::size_t o, std::size_t n) {
      target_.zero_bytes(static_cast<std::byte*>(dst) + o, n);
    });
  }
  void synchronize() const override { target_.synchronize(); }
  void* native_stream() const noexcept override { return target_.native_stream(); }
  std::string describe() const override { return target_.describe(); }
  void* allocate_pinned(std::size_t bytes) const override { return target_.allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr, std::size_t bytes) const noexcept override {
    target_.deallocate_pinned(ptr, bytes);
  }
  std::shared_ptr<Event> copy_async(void* dst, const void* src, std::size_t bytes,
                                    CopyDirection direction) const override {
    return target_.copy_async(dst, src, bytes, direction);
  }
  std::shared_ptr<Event> record(Stream stream) const override { return target_.record(stream); }
  void wait(Stream stream, const Event& event) const override { target_.wait(stream, event); }
  std::unique_ptr<AddressSpace> reserve_address_space(std::size_t reserve_bytes,
                                                      std::size_t slot_bytes,
                                                      int slots) const override {
    return target_.reserve_address_space(reserve_bytes, slot_bytes, slots);
  }
  std::size_t address_granularity() const override { return target_.address_granularity(); }
  const Backend& target() const noexcept override { return target_; }
  ChunkManager& manager() const noexcept { return manager_; }

private:
  /// Calls f(offset, n) over [0, bytes) in pieces that lie inside one chunk of `write` (written)
  /// and of `read` (read; either may be nullptr or memory the manager does not hold), with both
  /// pieces acquired for the call. Without a budget everything is on the device: one call.
  template <typename F>
  void in_pieces(const void* write, const void* read, std::size_t bytes, F f) const {
    if (!manager_.budgeted()) {
      f(0, bytes);
      return;
    }
    const auto* w = static_cast<const std::byte*>(write);
    const auto* r = static_cast<const std::byte*>(read);
    for (std::size_t o = 0; o < bytes;) {
      std::size_t n = bytes - o;
      if (w != nullptr) n = std::min(n, manager_.bytes_to_chunk_end(w + o));
      if (r != nullptr) n = std::min(n, manager_.bytes_to_chunk_end(r + o));
      Pins pins(&manager_);
      if (w != nullptr) pins.add(w + o, n, Access::Write);
      if (r != nullptr) pins.add(r + o, n, Access::Read);
      f(o, n);
      o += n;
    }
  }

  ChunkManager& manager_;
  const Backend& target_;
  TensorKind kind_;
  mutable std::uint64_t count_ = 0;
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

  // Disk tier.
  std::string disk_path;
  int disk_fd = -1;
  std::vector<std::string> made_folders; // the disk tier's folders this manager created
  std::vector<std::int64_t> free_disk;
  std::int64_t disk_slots = 0;
  std::uint64_t disk_written = 0;

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
    throw InvalidArgument("--chunk-size " + format_bytes(config_.chunk_bytes) +
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
      throw InvalidArgument("--device-memory " + format_bytes(config_.device_bytes) +
                            " is smaller than one chunk (--chunk-size " + format_bytes(s.chunk) +
                            ")");
    }
    s.slots = static_cast<int>(std::min<std::size_t>(config_.device_bytes / s.chunk, kMaxSlots));
  } else {
    s.slots = static_cast<int>(std::min<std::size_t>(s.region / s.chunk * kTensorKinds, kMaxSlots));
  }
  if (config_.host_bytes != 0) {
    if (config_.host_bytes < s.chunk) {
      throw InvalidArgument("--host-memory " + format_bytes(config_.host_bytes) +
                            " is smaller than one chunk (--chunk-size " + format_bytes(s.chunk) +
                            ")");
    }
    s.host_limit = config_.host_bytes / s.chunk;
  }
  if (!config_.offload_dir.empty()) open_disk_folder(config_.offload_dir, s.made_folders);
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
  if (s.disk_fd >= 0) close(s.disk_fd);
  // The folders this manager made for its disk tier, deepest first; rmdir leaves one that holds
  // anything else (another rank's file, say) alone.
  for (auto made = s.made_folders.rbegin(); made != s.made_folders.rend(); ++made)
    rmdir(made->c_str());
  s.space.reset();
}

// ---- Mechanism -----------------------------------------------------------------------------

class ChunkMover {
public:
  ChunkMover(ChunkManager::State& s, const Backend& backend, const OffloadConfig& config,
             OffloadStats& epoch, OffloadStats& total)
      : s_(s), backend_(backend), config_(config), epoch_(epoch), total_(total) {}

  /// When chunk `c` is next touched: its first position in the trace from the current one on
  /// (wrapping into the next epoch), kNever when the trace never touches it.
  std::uint64_t next_use(std::size_t c) const {
    auto it = s_.positions.find(c);
    if (it == s_.positions.end()) return kNever;
    const auto& p = it->second;
    // The touch at `position` is the next one: in acquire() the chunk being brought in (never a
    // victim), in a prefetch the chunk needed first.
    auto after = std::lower_bound(p.begin(), p.end(), s_.position);
    return after != p.end() ? *after : s_.trace.size() + p.front();
  }

  /// The victim among `candidates` the policy picks (kNever-use first, then farthest; or least
  /// recently used); skips `keep`. Returns false when there is none.
  bool choose(const std::vector<std::size_t>& candidates, std::size_t keep, bool pinned_ok,
              std::size_t& victim, std::uint64_t& victim_next) const {
    bool found = false;
    std::uint64_t best = 0;
    for (std::size_t c : candidates) {
      const Chunk& chunk = s_.chunks.at(c);
      if (c == keep || (!pinned_ok && chunk.pins > 0)) continue;
      const bool belady = config_.policy == EvictionPolicy::FarthestNextUse && !s_.trace.empty();
      // Score: larger is a better victim. A chunk holding nothing costs no move either way.
      const std::uint64_t score = !chunk.has_data ? kNever
                                  : belady        ? next_use(c)
                                                  : kNever - chunk.last_use;
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
    const std::uint64_t disk = static_cast<std::uint64_t>(s_.disk_slots) * s_.chunk;
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

  void open_disk() {
    if (s_.disk_fd >= 0) return;
    if (config_.offload_dir.empty()) return;
    s_.disk_path = config_.offload_dir + "/tessera-offload-rank" + std::to_string(config_.rank) +
                   "-" + std::to_string(getpid()) + ".bin";
    s_.disk_fd =
        open(s_.disk_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (s_.disk_fd < 0) {
      throw IoError("--offload-dir: cannot create " + s_.disk_path + ": " + errno_text());
    }
    // Unlinked at once: the file's blocks live while the descriptor does, and no exit path —
    // an exception, a signal, a killed rank — can leave it behind.
    unlink(s_.disk_path.c_str());
  }

  void write_to_disk(std::size_t c, Chunk& chunk) {
    open_disk();
    if (s_.disk_fd < 0) {
      throw InvalidArgument("the host tier (--host-memory " + format_bytes(config_.host_bytes) +
                            ") is full and there is no disk tier: give --offload-dir or a larger "
                            "--host-memory");
    }
    if (chunk.disk_slot < 0) {
      if (!s_.free_disk.empty()) {
        chunk.disk_slot = s_.free_disk.back();
        s_.free_disk.pop_back();
      } else {
        chunk.disk_slot = s_.disk_slots++;
        bump_peaks();
      }
    }
    const off_t at = static_cast<off_t>(chunk.disk_slot) * static_cast<off_t>(s_.chunk);
    std::size_t done = 0;
    while (done < s_.chunk) {
      std::size_t want = s_.chunk - done;
      if (s_.disk_written >= config_.fail_disk_writes_after)
        want = 0;
      else
        want = std::min<std::uint64_t>(want, config_.fail_disk_writes_after - s_.disk_written);
      const ssize_t n = want == 0 ? -1 : pwrite(s_.disk_fd, chunk.host + done, want, at + done);
      if (n <= 0) {
        if (n < 0 && errno == EINTR && want != 0) continue;
        const std::string why = want == 0 ? "no space left on device (injected)"
                                : n == 0  ? "short write"
                                          : errno_text();
        throw IoError("offload file " + s_.disk_path + " (--offload-dir): writing chunk " +
                      std::to_string(c) + " (" + format_bytes(s_.chunk) + ") at offset " +
                      std::to_string(at + static_cast<off_t>(done)) + " failed after " +
                      std::to_string(done) + " bytes: " + why);
      }
      done += static_cast<std::size_t>(n);
      s_.disk_written += static_cast<std::uint64_t>(n);
    }
    chunk.disk_valid = true;
    count([&](OffloadStats& st) { st.host_to_disk_bytes += s_.chunk; });
  }

  void read_from_disk(std::size_t c, Chunk& chunk) {
    const off_t at = static_cast<off_t>(chunk.disk_slot) * static_cast<off_t>(s_.chunk);
    std::size_t done = 0;
    while (done < s_.chunk) {
      const ssize_t n = pread(s_.disk_fd, chunk.host + done, s_.chunk - done, at + done);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        throw IoError("offload file " + s_.disk_path + " (--offload-dir): reading chunk " +
                      std::to_string(c) + " at offset " + std::to_string(at) + " failed: " +
                      (n == 0 ? std::string("unexpected end of file") : errno_text()));
      }
      done += static_cast<std::size_t>(n);
    }
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
      throw InvalidArgument("the host tier (--host-memory " + format_bytes(config_.host_bytes) +
                            ") cannot hold one more chunk of " + format_bytes(s_.chunk));
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
    if (chunk.disk_slot >= 0) s.free_disk.push_back(chunk.disk_slot);
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
        "the device budget (--device-memory " + format_bytes(config_.device_bytes) + ", " +
        std::to_string(s.slots) +
        " chunks) cannot hold what is needed at once: " + std::to_string(s.pinned) +
        " chunks are pinned and '" + t.name + "' needs " + std::to_string(more) +
        " more; give a larger "
        "--device-memory or a smaller --chunk-size");
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
                        ") cannot fit in the device budget (--device-memory " +
                        format_bytes(config_.device_bytes) + ", " + std::to_string(s.slots) +
                        " chunks) at once: give a larger --device-memory or a smaller "
                        "--chunk-size");
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
      if (chunk.disk_slot >= 0) s.free_disk.push_back(chunk.disk_slot);
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
