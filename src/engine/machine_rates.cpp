// STREAM triad and sgemm measurements, and the SpMM byte model.
#include "tessera/engine/machine_rates.hpp"

#include "tessera/core/device.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/ops/ops.hpp"

namespace tessera {

double stream_triad_gbps(std::int64_t elements, int repeats) {
  const BackendPtr cpu = make_cpu_backend();
  Dense a = Dense::zeros(cpu, elements, 1), b = Dense::zeros(cpu, elements, 1),
        c = Dense::zeros(cpu, elements, 1);
  b.fill(1.0f);
  c.fill(2.0f);
  float* pa = a.data();
  const float* pb = b.data();
  const float* pc = c.data();
  const float s = 3.0f;
  const double seconds = median_seconds(repeats, [&] {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < elements; ++i)
      pa[i] = pb[i] + s * pc[i];
  });
  return 3.0 * static_cast<double>(elements) * sizeof(float) / seconds / 1e9;
}

double sgemm_gflops(std::int64_t m, std::int64_t n, std::int64_t k, int repeats) {
  const BackendPtr cpu = make_cpu_backend();
  Dense a = Dense::zeros(cpu, m, k), b = Dense::zeros(cpu, k, n), c = Dense::zeros(cpu, m, n);
  a.fill(0.5f);
  b.fill(0.25f);
  const double seconds = median_seconds(repeats, [&] {
    ops::gemm(*cpu, Transpose::No, Transpose::No, 1.0f, a.cview(), b.cview(), 0.0f, c.view());
  });
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / seconds /
         1e9;
}

double spmm_model_bytes(std::int64_t rows, std::int64_t nnz, std::int64_t width) {
  const double r = static_cast<double>(rows), z = static_cast<double>(nnz);
  const double w = static_cast<double>(width) * sizeof(float);
  return (r + 1) * sizeof(Offset) + z * (sizeof(LocalId) + sizeof(float)) + z * w + r * w;
}

} // namespace tessera
