// GradientAllreduce: pack, one allreduce, unpack.
#include "tessera/comm/gradient_allreduce.hpp"

namespace tessera::comm {

GradientAllreduce::GradientAllreduce(Communicator& comm, const BackendPtr& backend,
                                     std::vector<Dense*> gradients)
    : comm_(comm), backend_(backend), gradients_(std::move(gradients)) {
  std::int64_t total = 0;
  for (const Dense* g : gradients_) total += g->size();
  const bool on_device = backend->kind() != DeviceKind::Cpu && comm.accepts_device_memory();
  packed_ = Buffer<float>(on_device ? backend : make_cpu_backend(), total);
}

void GradientAllreduce::run() {
  const bool on_device = packed_.backend()->kind() != DeviceKind::Cpu;
  std::int64_t at = 0;
  for (const Dense* g : gradients_) {
    if (on_device) {
      backend_->copy_within(packed_.data() + at, g->data(), g->bytes());
    } else {
      backend_->copy_to_host(packed_.data() + at, g->data(), g->bytes());
    }
    at += g->size();
  }
  comm_.allreduce_sum(packed_.span());
  at = 0;
  for (Dense* g : gradients_) {
    if (on_device) {
      backend_->copy_within(g->data(), packed_.data() + at, g->bytes());
    } else {
      backend_->copy_from_host(g->data(), packed_.data() + at, g->bytes());
    }
    at += g->size();
  }
}

}  // namespace tessera::comm
