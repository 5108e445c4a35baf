// DataParallel: buckets planned once from the gradients' addresses, each summed over the ranks by
// a non-blocking allreduce that starts when backward has written the bucket's last gradient.
#include "tessera/engine/data_parallel.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/core.h>
#include <limits>
#include <numeric>

namespace tessera {

namespace {

std::uintptr_t address(const std::byte* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p);
}

} // namespace

std::vector<BucketPlan> plan_buckets(std::vector<std::pair<const std::byte*, std::size_t>> ranges,
                                     std::size_t bucket_bytes) {
  if (bucket_bytes == 0)
    throw InvalidArgument("plan_buckets: bucket_bytes must be positive, got 0");
  std::vector<std::size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return address(ranges[a].first) < address(ranges[b].first);
  });

  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<BucketPlan> plans;
  std::size_t open = kNone;     // the bucket the next adjacent range may join
  std::size_t previous = kNone; // the last non-empty range, in address order
  std::uintptr_t end = 0;       // its end
  for (const std::size_t i : order) {
    const auto [begin, bytes] = ranges[i];
    if (bytes == 0) {
      plans.push_back({{i}, begin, 0});
      continue;
    }
    const std::uintptr_t at = address(begin);
    if (previous != kNone && at < end) {
      throw InvalidArgument(fmt::format(
          "plan_buckets: range {} ({} bytes at {:#x}) overlaps range {} (which ends at {:#x})", i,
          bytes, at, previous, end));
    }
    const bool joins = open != kNone && at - end < kBucketGapBytes &&
                       at + bytes - address(plans[open].begin) <= bucket_bytes;
    if (joins) {
      plans[open].members.push_back(i);
      plans[open].bytes = at + bytes - address(plans[open].begin);
    } else {
      open = plans.size();
      plans.push_back({{i}, begin, bytes});
    }
    previous = i;
    end = at + bytes;
  }
  return plans;
}

DataParallel::DataParallel(comm::Communicator& comm, BackendPtr backend,
                           std::vector<Parameter<float>*> parameters, std::size_t bucket_bytes)
    : comm_(comm), backend_(std::move(backend)) {
  if (backend_ == nullptr) throw InvalidArgument("DataParallel needs a backend, got none");
  std::vector<std::pair<const std::byte*, std::size_t>> ranges;
  ranges.reserve(parameters.size());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter<float>* p = parameters[i];
    if (p == nullptr) throw InvalidArgument(fmt::format("DataParallel: parameter {} is null", i));
    const BackendPtr& on = p->grad.backend();
    if (!p->grad.empty() &&
        (on->kind() != backend_->kind() || on->device_id() != backend_->device_id())) {
      throw InvalidArgument(
          fmt::format("DataParallel: the gradient of parameter {} ('{}') is on {}, expected {}", i,
                      p->name, on->describe(), backend_->describe()));
    }
    if (!slots_.emplace(p, Slot{}).second) {
      throw InvalidArgument(
          fmt::format("DataParallel: parameter {} ('{}') is given twice", i, p->name));
    }
    ranges.emplace_back(reinterpret_cast<const std::byte*>(p->grad.data()), p->grad.bytes());
  }
  // Where the communicator cannot read device memory, each bucket travels as a host copy.
  staged_ = backend_->kind() != DeviceKind::Cpu && !comm_.accepts_device_memory();
  if (!parameters.empty() && parameters.front() != nullptr) {
    ChunkManager* manager = manager_of(parameters.front()->grad.backend());
    if (manager != nullptr && manager->budgeted()) memory_ = manager;
  }
  std::vector<BucketPlan> plans = plan_buckets(ranges, bucket_bytes);
  // Buckets follow addresses, which need not be laid out alike on every rank (allocations before
  // the model's differ by rank): where the ranks' plans differ, every gradient is a bucket of its
  // own, the same everywhere. A hash of the plan's membership, compared by one allreduce.
  std::uint64_t hash = 1469598103934665603ull;
  for (const BucketPlan& plan : plans) {
    for (const std::size_t m : plan.members)
      hash = (hash ^ (m + 1)) * 1099511628211ull;
    hash = (hash ^ 0xffffull) * 1099511628211ull;
  }
  const auto exact = static_cast<double>(hash >> 12); // below 2^53: exact in a double
  double bounds[] = {exact, -exact};
  if (comm_.size() > 1) comm_.allreduce_max(std::span<double>(bounds));
  if (bounds[0] != -bounds[1]) {
    plans.clear();
    for (std::size_t i = 0; i < ranges.size(); ++i)
      plans.push_back({{i}, ranges[i].second > 0 ? ranges[i].first : nullptr, ranges[i].second});
  }
  buckets_.resize(plans.size());
  for (std::size_t b = 0; b < plans.size(); ++b) {
    Bucket& bucket = buckets_[b];
    // Gradients are floats, so a bucket's start and padding are whole floats.
    bucket.values = {reinterpret_cast<float*>(const_cast<std::byte*>(plans[b].begin)),
                     plans[b].bytes / sizeof(float)};
    bucket.members = bucket.unready = plans[b].members.size();
    if (staged_) bucket.staging.resize(bucket.values.size());
    for (const std::size_t m : plans[b].members)
      slots_[parameters[m]].bucket = b;
  }
}

DataParallel::~DataParallel() = default; // each Pending waits for its sum as it goes

void DataParallel::gradient_ready(const Parameter<float>& p) {
  const auto slot = slots_.find(&p);
  if (slot == slots_.end()) {
    throw InvalidArgument(fmt::format(
        "DataParallel::gradient_ready: parameter '{}' is not one of the {} whose gradients it sums",
        p.name, slots_.size()));
  }
  if (slot->second.ready) {
    throw InvalidArgument(fmt::format("DataParallel::gradient_ready: parameter '{}' was marked "
                                      "ready twice in one step (finish() ends a step)",
                                      p.name));
  }
  slot->second.ready = true;
  // Open MPI moves a non-blocking collective on only inside MPI calls: give the ones in flight
  // a turn at every mark, which comes once per layer of backward.
  for (const std::size_t b : start_order_) {
    Bucket& bucket = buckets_[b];
    if (!bucket.done) bucket.done = bucket.pending->test();
  }
  if (--buckets_[slot->second.bucket].unready == 0) start(slot->second.bucket);
}

void DataParallel::finish() {
  const Stopwatch clock;
  // In bucket order: every rank marked the same parameters, so the same buckets are left.
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (!buckets_[b].started) start(b);
  }
  for (const std::size_t b : start_order_) complete(b);
  for (Bucket& bucket : buckets_) {
    bucket.pending.reset();
    bucket.started = bucket.done = bucket.summed = false;
    bucket.unready = bucket.members;
  }
  for (auto& [parameter, slot] : slots_)
    slot.ready = false;
  start_order_.clear();
  last_wait_seconds_ = clock.seconds();
}

void DataParallel::complete(std::size_t b) {
  Bucket& bucket = buckets_[b];
  if (bucket.summed) return;
  bucket.pending->wait();
  if (staged_) {
    backend_->copy_from_host(bucket.values.data(), bucket.staging.data(),
                             bucket.values.size_bytes());
  }
  bucket.pins.reset();
  in_flight_bytes_ -= bucket.values.size_bytes();
  bucket.summed = true;
}

void DataParallel::start(std::size_t b) {
  Bucket& bucket = buckets_[b];
  if (memory_ != nullptr) {
    // A bucket in flight stays on the device; keep those under a quarter of the budget by
    // completing the oldest first (less overlap, never more memory than the budget).
    const std::size_t limit = memory_->config().device_bytes / 4;
    for (const std::size_t earlier : start_order_) {
      if (in_flight_bytes_ + bucket.values.size_bytes() <= limit) break;
      complete(earlier);
    }
    bucket.pins = std::make_unique<Pins>(memory_);
    bucket.pins->add(bucket.values.data(), bucket.values.size_bytes(), Access::ReadWrite);
  }
  in_flight_bytes_ += bucket.values.size_bytes();
  std::span<float> travelling = bucket.values;
  if (staged_) {
    backend_->copy_to_host(bucket.staging.data(), bucket.values.data(), bucket.values.size_bytes());
    travelling = bucket.staging;
  }
  bucket.pending = comm_.start_allreduce_sum(travelling);
  bucket.started = true;
  start_order_.push_back(b);
}

} // namespace tessera
