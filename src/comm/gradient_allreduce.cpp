// GradientAllreduce: pack, one allreduce, unpack.
#include "tessera/comm/gradient_allreduce.hpp"

namespace tessera::comm {

GradientAllreduce::GradientAllreduce(Communicator& comm, const BackendPtr& backend,
                                     std::vector<Parameter<float>*> params)
    : comm_(comm), backend_(backend), params_(std::move(params)) {
  std::int64_t total = 0;
  for (const Parameter<float>* p : params_) total += p->grad.size();
  const bool on_device = backend->kind() != DeviceKind::Cpu && comm.accepts_device_memory();
  packed_ = Buffer<float>(on_device ? backend : make_cpu_backend(), total);
}

void GradientAllreduce::run() {
  const bool on_device = packed_.backend()->kind() != DeviceKind::Cpu;
  std::int64_t at = 0;
  for (const Parameter<float>* p : params_) {
    if (on_device) {
      backend_->copy_within(packed_.data() + at, p->grad.data(), p->grad.bytes());
    } else {
      backend_->copy_to_host(packed_.data() + at, p->grad.data(), p->grad.bytes());
    }
    at += p->grad.size();
  }
  comm_.allreduce_sum(packed_.span());
  at = 0;
  for (Parameter<float>* p : params_) {
    if (on_device) {
      backend_->copy_within(p->grad.data(), packed_.data() + at, p->grad.bytes());
    } else {
      backend_->copy_from_host(p->grad.data(), packed_.data() + at, p->grad.bytes());
    }
    at += p->grad.size();
  }
}

}  // namespace tessera::comm
