// Device kernel of the optimizer family: one fused Adam / AdamW update per element.
#include "grid.cuh"
#include "launch.hpp"

namespace tessera::kernels::cuda::launch {

namespace {

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, std::int64_t size, T step_size,
                            T bc2_sqrt, T beta1, T beta2, T eps, T shrink, T l2) {
  for (std::int64_t i = thread_index(); i < size; i += grid_stride()) {
    const T gi = g[i] + l2 * p[i];
    const T mi = beta1 * m[i] + (T{1} - beta1) * gi;
    const T vi = beta2 * v[i] + (T{1} - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * shrink - step_size * mi / (sqrt(vi) / bc2_sqrt + eps);
  }
}

} // namespace

template <typename T>
void adam_step(T* param, const T* grad, T* m, T* v, std::int64_t size, T step_size, T bc2_sqrt,
               T beta1, T beta2, T eps, T shrink, T l2, cudaStream_t stream) {
  adam_kernel<<<blocks_for(size), kBlock, 0, stream>>>(param, grad, m, v, size, step_size, bc2_sqrt,
                                                       beta1, beta2, eps, shrink, l2);
}

template void adam_step<float>(float*, const float*, float*, float*, std::int64_t, float, float,
                               float, float, float, float, float, cudaStream_t);
template void adam_step<double>(double*, const double*, double*, double*, std::int64_t, double,
                                double, double, double, double, double, double, cudaStream_t);

} // namespace tessera::kernels::cuda::launch
