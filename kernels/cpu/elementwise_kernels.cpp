// OpenMP elementwise kernels: ReLU and dropout with masks drawn from the counter-based RNG.
#include "tessera/kernels/elementwise_kernels.hpp"

#include "parallel.hpp"
#include "random_lanes.hpp"
#include "vector_math.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <omp.h>
#include <type_traits>

namespace tessera::kernels::cpu {
namespace {

/// The multiplier of one element: 1/(1-p) where the draw survives (uniform >= p), else 0.
template <typename T> T dropout_factor(std::uint32_t bits, float p, T scale) noexcept {
  return bits_to_unit_float(bits) >= p ? scale : T{0};
}

template <typename T> T inverse_keep(float p) noexcept {
  return T{1} / (T{1} - static_cast<T>(p));
}

} // namespace

template <typename T> void relu_forward(const Backend&, ConstDenseView<T> x, DenseView<T> y) {
  const std::int64_t size = x.size();
  // `x < 0 ? 0 : x` rather than `x > 0 ? x : 0` so that NaN propagates, as in torch.
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    y.data[i] = x.data[i] < T{0} ? T{0} : x.data[i];
}

template <typename T>
void relu_backward(const Backend&, ConstDenseView<T> y, ConstDenseView<T> dy, DenseView<T> dx,
                   T scale) {
  const std::int64_t size = y.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    dx.data[i] = y.data[i] > T{0} ? scale * dy.data[i] : T{0};
}

template <typename T> void elu_forward(const Backend&, ConstDenseView<T> x, DenseView<T> y) {
  const std::int64_t size = x.size();
  if constexpr (std::is_same_v<T, float>) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < size; ++i)
      y.data[i] = x.data[i] > 0.0f ? x.data[i] : expm1_float(std::min(x.data[i], 0.0f));
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < size; ++i)
      y.data[i] = x.data[i] > T{0} ? x.data[i] : std::expm1(x.data[i]);
  }
}

template <typename T>
void elu_backward(const Backend&, ConstDenseView<T> y, ConstDenseView<T> dy, DenseView<T> dx,
                  T y_scale) {
  const std::int64_t size = y.size();
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < size; ++i)
    dx.data[i] = y.data[i] > T{0} ? dy.data[i] : dy.data[i] * (y.data[i] * y_scale + T{1});
}

template <typename T> void gelu_forward(const Backend&, ConstDenseView<T> x, DenseView<T> y) {
  const std::int64_t size = x.size();
  const T inv_sqrt2 = T(0.70710678118654752440);
  if constexpr (std::is_same_v<T, float>) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < size; ++i)
      y.data[i] = x.data[i] * normal_cdf_float(x.data[i]);
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < size; ++i)
      y.data[i] = T(0.5) * x.data[i] * (T{1} + std::erf(x.data[i] * inv_sqrt2));
  }
}

template <typename T>
void gelu_backward(const Backend&, ConstDenseView<T> x, ConstDenseView<T> dy, DenseView<T> dx) {
  const std::int64_t size = x.size();
  const T inv_sqrt2 = T(0.70710678118654752440);
  const T inv_sqrt_2pi = T(0.39894228040143267794);
  if constexpr (std::is_same_v<T, float>) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < size; ++i) {
      const float v = x.data[i];
      dx.data[i] = dy.data[i] * (normal_cdf_float(v) + v * inv_sqrt_2pi * exp_float(-0.5f * v * v));
    }
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < size; ++i) {
      const T v = x.data[i];
      const T cdf = T(0.5) * (T{1} + std::erf(v * inv_sqrt2));
      dx.data[i] = dy.data[i] * (cdf + v * inv_sqrt_2pi * std::exp(T(-0.5) * v * v));
    }
  }
}

template <typename T>
void column_sums(const Backend&, ConstDenseView<T> a, ConstDenseView<T> b, std::span<T> sum_a,
                 std::span<T> sum_ab) {
  // One column per iteration, its rows in order: the same sums for any thread count.
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < a.cols; ++c) {
    double s = 0.0, p = 0.0;
    for (std::int64_t r = 0; r < a.rows; ++r) {
      const double v = a(r, c);
      s += v;
      p += v * static_cast<double>(b(r, c));
    }
    sum_a[static_cast<std::size_t>(c)] = static_cast<T>(s);
    sum_ab[static_cast<std::size_t>(c)] = static_cast<T>(p);
  }
}

template <typename T>
void batch_norm_apply(const Backend&, ConstDenseView<T> x, std::span<const T> mean,
                      std::span<const T> rstd, std::span<const T> gamma, std::span<const T> beta,
                      DenseView<T> y, DenseView<T> xhat) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < x.rows; ++r) {
    for (std::int64_t c = 0; c < x.cols; ++c) {
      const auto j = static_cast<std::size_t>(c);
      const T normalized = (x(r, c) - mean[j]) * rstd[j];
      xhat(r, c) = normalized;
      y(r, c) = normalized * gamma[j] + beta[j];
    }
  }
}

template <typename T>
void batch_norm_backward(const Backend&, ConstDenseView<T> dy, ConstDenseView<T> xhat,
                         std::span<const T> rstd, std::span<const T> gamma,
                         std::span<const T> mean_dy, std::span<const T> mean_dy_xhat,
                         DenseView<T> dx) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < dy.rows; ++r) {
    for (std::int64_t c = 0; c < dy.cols; ++c) {
      const auto j = static_cast<std::size_t>(c);
      dx(r, c) = gamma[j] * rstd[j] * (dy(r, c) - mean_dy[j] - xhat(r, c) * mean_dy_xhat[j]);
    }
  }
}

template <typename T>
void layer_norm_forward(const Backend&, ConstDenseView<T> x, std::span<const T> gamma,
                        std::span<const T> beta, T eps, DenseView<T> y, DenseView<T> xhat,
                        std::span<T> rstd) {
  const std::int64_t f = x.cols;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const T* in = x.row(r);
    double sum = 0.0;
    for (std::int64_t c = 0; c < f; ++c)
      sum += in[c];
    const double mean = f > 0 ? sum / static_cast<double>(f) : 0.0;
    double squares = 0.0;
    for (std::int64_t c = 0; c < f; ++c) {
      const double d = in[c] - mean;
      squares += d * d;
    }
    const T inv = static_cast<T>(1.0 / std::sqrt((f > 0 ? squares / static_cast<double>(f) : 0.0) +
                                                 static_cast<double>(eps)));
    rstd[static_cast<std::size_t>(r)] = inv;
    T* normalized = xhat.row(r);
    T* out = y.row(r);
    for (std::int64_t c = 0; c < f; ++c) {
      normalized[c] = (in[c] - static_cast<T>(mean)) * inv;
      out[c] =
          normalized[c] * gamma[static_cast<std::size_t>(c)] + beta[static_cast<std::size_t>(c)];
    }
  }
}

template <typename T>
void layer_norm_backward(const Backend&, ConstDenseView<T> dy, ConstDenseView<T> xhat,
                         std::span<const T> rstd, std::span<const T> gamma, DenseView<T> dx,
                         DenseView<T> dy_xhat) {
  const std::int64_t f = dy.cols;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < dy.rows; ++r) {
    const T* g_row = dy.row(r);
    const T* normalized = xhat.row(r);
    double sum_g = 0.0, sum_gx = 0.0;
    for (std::int64_t c = 0; c < f; ++c) {
      const double g = g_row[c] * gamma[static_cast<std::size_t>(c)];
      sum_g += g;
      sum_gx += g * normalized[c];
    }
    const auto mean_g = static_cast<T>(f > 0 ? sum_g / static_cast<double>(f) : 0.0);
    const auto mean_gx = static_cast<T>(f > 0 ? sum_gx / static_cast<double>(f) : 0.0);
    const T inv = rstd[static_cast<std::size_t>(r)];
    T* out = dx.row(r);
    T* product = dy_xhat.row(r);
    for (std::int64_t c = 0; c < f; ++c) {
      product[c] = g_row[c] * normalized[c];
      out[c] =
          inv * (g_row[c] * gamma[static_cast<std::size_t>(c)] - mean_g - normalized[c] * mean_gx);
    }
  }
}

namespace {

/// An output element: T itself, or rounded to bfloat16.
template <typename Out, typename T> Out stored(T value) noexcept {
  if constexpr (std::is_same_v<Out, Bf16>) {
    return to_bf16(value);
  } else {
    return value;
  }
}

/// y = a(x + bias) · mask / (1 - p) row by row, a = ReLU or the identity; bias: [x.cols] or
/// nullptr; y holds T or bfloat16. y may be x.
template <typename T, typename Out = T>
void masked_rows(ConstDenseView<T> x, DenseView<Out> y, const T* bias, float p, const RngKey& key,
                 RowIds rows, bool relu) {
  const std::int64_t cols = x.cols;
  const T scale = inverse_keep<T>(p);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const GlobalId id = rows(r);
    const T* in = x.row(r);
    Out* out = y.row(r);
    // One batch of vectorized Philox calls gives the draws of 64 consecutive columns.
    for (std::int64_t c0 = 0; c0 < cols; c0 += RandomLanes::kColumns) {
      const RandomLanes bits(key, id, static_cast<std::uint32_t>(c0 / 4));
      const int width = static_cast<int>(std::min<std::int64_t>(RandomLanes::kColumns, cols - c0));
#pragma omp simd
      for (int c = 0; c < width; ++c) {
        const T v = bias != nullptr ? in[c0 + c] + bias[c0 + c] : in[c0 + c];
        out[c0 + c] =
            stored<Out>((relu && v < T{0} ? T{0} : v) * dropout_factor(bits.draws[c], p, scale));
      }
    }
  }
}

} // namespace

template <typename T>
void dropout(const Backend&, ConstDenseView<T> x, DenseView<T> y, float p, const RngKey& key,
             RowIds rows, bool relu) {
  masked_rows<T>(x, y, nullptr, p, key, rows, relu);
}

void dropout_to_bf16(const Backend&, ConstDenseView<float> x, DenseView<Bf16> y, float p,
                     const RngKey& key, RowIds rows) {
  masked_rows<float, Bf16>(x, y, nullptr, p, key, rows, false);
}

template <typename T>
void bias_activation(const Backend&, DenseView<T> y, std::span<const T> bias, float p,
                     const RngKey& key, RowIds rows, bool relu) {
  const T* b = bias.empty() ? nullptr : bias.data();
  if (p > 0.0f) return masked_rows<T>(ConstDenseView<T>(y), y, b, p, key, rows, relu);
  const std::int64_t cols = y.cols;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < y.rows; ++r) {
    T* row = y.row(r);
#pragma omp simd
    for (std::int64_t c = 0; c < cols; ++c) {
      const T v = b != nullptr ? row[c] + b[c] : row[c];
      row[c] = relu && v < T{0} ? T{0} : v; // NaN propagates, as in relu_forward
    }
  }
}

template <typename T>
void dropout_csr_values(const Backend&, CsrView<T> in, std::span<T> out_val, float p,
                        const RngKey& key, RowIds rows) {
  if (in.rows == 0) return;
  const T scale = inverse_keep<T>(p);
#pragma omp parallel
  {
    const Range part =
        balanced_rows(in.row_ptr, in.rows, omp_get_thread_num(), omp_get_num_threads());
    for (std::int64_t r = part.begin; r < part.end; ++r) {
      const GlobalId id = rows(r);
      // Columns are sorted, so neighbouring nonzeros often share a block of four draws.
      std::int64_t block = -1;
      std::array<std::uint32_t, 4> bits{};
      for (std::int64_t k = in.row_ptr[r]; k < in.row_ptr[r + 1]; ++k) {
        const auto c = static_cast<std::uint32_t>(in.col[k]);
        if (c / 4 != block) {
          block = c / 4;
          bits = random_bits4(key, id, c / 4);
        }
        out_val[k] = in.val[k] * dropout_factor(bits[c % 4], p, scale);
      }
    }
  }
}

TESSERA_INSTANTIATE_ELEMENTWISE_KERNELS(float);
TESSERA_INSTANTIATE_ELEMENTWISE_KERNELS(double);

} // namespace tessera::kernels::cpu
