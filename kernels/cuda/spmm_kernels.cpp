// CUDA SpMM through cuSPARSE's generic API with a cached plan per (matrix, width): descriptors,
// 32-bit row offsets and the workspace are made on first use and reused every epoch, until the
// matrix (CsrT, by its handle) is destroyed. A view of no CsrT (handle 0) gets a plan per call.
// Aᵀ·B uses an explicit transposed structure built once; its values are gathered from A's on every
// call, so A's values may change between calls (dropout on sparse features) but its structure not.
#include "tessera/kernels/spmm_kernels.hpp"

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "cuda_libraries.hpp"
#include "launch.hpp"
#include "tessera/core/error.hpp"

#include <cstdint>
#include <fmt/core.h>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera::kernels::cuda {

namespace {

/// Device memory owned by a plan (plain cudaMalloc: cudaFree waits for the kernels using it, so a
/// plan may die as soon as its matrix is released).
class DeviceArray {
public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t bytes) {
    if (bytes > 0) TESSERA_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  DeviceArray(DeviceArray&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }
  ~DeviceArray() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  void* get() const noexcept { return ptr_; }

private:
  void* ptr_ = nullptr;
};

template <typename I> DeviceArray upload(const CudaBackend& be, const std::vector<I>& host) {
  DeviceArray out(host.size() * sizeof(I));
  be.copy_from_host(out.get(), host.data(), host.size() * sizeof(I));
  return out;
}

template <typename T> constexpr cudaDataType value_type() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
}

/// One product C = S · B (+ beta · C) for a fixed sparse S and width: S's descriptor (over 32-bit
/// offsets that start at 0), B and C descriptors whose data pointers are set per call, the
/// workspace.
struct SpmmPlan {
  DeviceArray offsets; // int32 [rows + 1]
  DeviceArray columns; // int32 [nnz] (transposed plans only; others use A's columns)
  DeviceArray perm;    // int64 [nnz] transposed plans: value k of Aᵀ is A's value perm[k]
  DeviceArray values;  // T [nnz] transposed plans: the gathered values
  DeviceArray workspace;
  cusparseSpMatDescr_t sparse = nullptr;
  cusparseDnMatDescr_t b = nullptr, c = nullptr;
  std::int64_t nnz = 0;
  Offset base = 0; // row_ptr[0] of A (non-zero for a row slice): A's arrays start there

  SpmmPlan() = default;
  SpmmPlan(const SpmmPlan&) = delete;
  SpmmPlan& operator=(const SpmmPlan&) = delete;
  ~SpmmPlan() {
    if (sparse != nullptr) cusparse().destroy_sp_mat(sparse);
    if (b != nullptr) cusparse().destroy_dn_mat(b);
    if (c != nullptr) cusparse().destroy_dn_mat(c);
  }
};

constexpr cusparseSpMMAlg_t kAlgorithm = CUSPARSE_SPMM_CSR_ALG2; // row-major B and C

/// The host copy of A's structure (row pointers rebased to 0, and columns when asked).
struct HostStructure {
  Offset base = 0;
  std::vector<std::int32_t> offsets;
  std::vector<std::int32_t> columns;
};

template <typename T>
HostStructure host_structure(const CudaBackend& be, CsrView<T> a, bool with_columns) {
  std::vector<Offset> row_ptr(static_cast<std::size_t>(a.rows) + 1);
  be.copy_to_host(row_ptr.data(), a.row_ptr, row_ptr.size() * sizeof(Offset));
  const Offset base = row_ptr.front();
  const Offset nnz = row_ptr.back() - base;
  if (nnz > std::numeric_limits<std::int32_t>::max() ||
      a.rows >= std::numeric_limits<std::int32_t>::max()) {
    throw InvalidArgument(fmt::format("CUDA SpMM: a matrix of {} rows and {} nonzeros exceeds the "
                                      "32-bit indices of this backend; split the tile",
                                      a.rows, nnz));
  }
  HostStructure s;
  s.base = base;
  s.offsets.resize(row_ptr.size());
  for (std::size_t i = 0; i < row_ptr.size(); ++i)
    s.offsets[i] = static_cast<std::int32_t>(row_ptr[i] - base);
  if (with_columns) {
    s.columns.resize(static_cast<std::size_t>(nnz));
    be.copy_to_host(s.columns.data(), a.col + base, s.columns.size() * sizeof(std::int32_t));
  }
  return s;
}

/// Descriptors and workspace for S [rows, cols] with `nnz` values at `values` times B
/// [cols, width] into C [rows, width] (their data pointers are reset on every call).
template <typename T>
void describe(const CudaBackend& be, SpmmPlan& plan, std::int64_t rows, std::int64_t cols,
              void* columns, void* values, std::int64_t width, const T* b, T* c) {
  check(cusparse().create_csr(&plan.sparse, rows, cols, plan.nnz, plan.offsets.get(), columns,
                              values, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                              CUSPARSE_INDEX_BASE_ZERO, value_type<T>()),
        "cusparseCreateCsr");
  check(cusparse().create_dn_mat(&plan.b, cols, width, width, const_cast<T*>(b), value_type<T>(),
                                 CUSPARSE_ORDER_ROW),
        "cusparseCreateDnMat");
  check(
      cusparse().create_dn_mat(&plan.c, rows, width, width, c, value_type<T>(), CUSPARSE_ORDER_ROW),
      "cusparseCreateDnMat");
  const T one = 1, zero = 0;
  std::size_t bytes = 0;
  check(cusparse().spmm_buffer_size(be.cusparse_handle(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                    CUSPARSE_OPERATION_NON_TRANSPOSE, &one, plan.sparse, plan.b,
                                    &zero, plan.c, value_type<T>(), kAlgorithm, &bytes),
        "cusparseSpMM_bufferSize");
  plan.workspace = DeviceArray(bytes);
}

template <typename T>
SpmmPlan* make_plan(const CudaBackend& be, CsrView<T> a, const T* b, T* c, std::int64_t width) {
  auto plan = std::make_unique<SpmmPlan>();
  const HostStructure s = host_structure(be, a, false);
  plan->nnz = s.offsets.back();
  plan->base = s.base;
  if (plan->nnz == 0) return plan.release(); // the product is zero: no descriptors needed
  plan->offsets = upload(be, s.offsets);
  describe<T>(be, *plan, a.rows, a.cols, const_cast<LocalId*>(a.col + s.base),
              const_cast<T*>(a.val + s.base), width, b, c);
  return plan.release();
}

/// The plan of Aᵀ [cols, rows]: its structure by a counting sort of A's columns, on the host
/// once; perm maps each of Aᵀ's values to A's.
template <typename T>
SpmmPlan* make_transposed_plan(const CudaBackend& be, CsrView<T> a, const T* b, T* c,
                               std::int64_t width) {
  auto plan = std::make_unique<SpmmPlan>();
  const HostStructure s = host_structure(be, a, true);
  const std::int64_t nnz = s.offsets.back();
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(a.cols) + 1, 0);
  for (const std::int32_t c : s.columns)
    ++offsets[static_cast<std::size_t>(c) + 1];
  for (std::size_t i = 1; i < offsets.size(); ++i)
    offsets[i] += offsets[i - 1];
  std::vector<std::int32_t> cursor(offsets.begin(), offsets.end() - 1);
  std::vector<std::int32_t> columns(static_cast<std::size_t>(nnz));
  std::vector<std::int64_t> perm(static_cast<std::size_t>(nnz));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (std::int32_t k = s.offsets[r]; k < s.offsets[r + 1]; ++k) {
      const std::int32_t dst = cursor[s.columns[k]]++;
      columns[dst] = static_cast<std::int32_t>(r);
      perm[dst] = k;
    }
  }
  plan->nnz = nnz;
  plan->base = s.base;
  if (nnz == 0) return plan.release();
  plan->offsets = upload(be, offsets);
  plan->columns = upload(be, columns);
  plan->perm = upload(be, perm);
  plan->values = DeviceArray(static_cast<std::size_t>(nnz) * sizeof(T));
  describe<T>(be, *plan, a.cols, a.rows, plan->columns.get(), plan->values.get(), width, b, c);
  return plan.release();
}

/// C = beta · C, what is left of S · B + beta · C when S · B is zero; C: `size` values. beta = 0
/// writes zeros without reading C, so NaNs in it do not survive.
template <typename T> void scale_output(const CudaBackend& be, T* c, std::int64_t size, T beta) {
  if (beta == T{0}) {
    be.zero_bytes(c, static_cast<std::size_t>(size) * sizeof(T));
  } else if (beta != T{1}) {
    launch::scale(beta, c, size, be.stream());
    check_launch("scale");
  }
}

/// C = S · B + beta · C with the plan's S; C: [rows, width] of `c_size` values. The plan does not
/// depend on beta: cuSPARSE takes it per call (and does not read C when it is 0).
template <typename T>
void run(const CudaBackend& be, SpmmPlan& plan, const T* b, T* c, std::int64_t c_size, T beta) {
  if (plan.nnz == 0) {
    scale_output(be, c, c_size, beta);
    return;
  }
  check(cusparse().dn_mat_set_values(plan.b, const_cast<T*>(b)), "cusparseDnMatSetValues");
  check(cusparse().dn_mat_set_values(plan.c, c), "cusparseDnMatSetValues");
  const T one = 1;
  check(cusparse().spmm(be.cusparse_handle(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                        CUSPARSE_OPERATION_NON_TRANSPOSE, &one, plan.sparse, plan.b, &beta, plan.c,
                        value_type<T>(), kAlgorithm, plan.workspace.get()),
        "cusparseSpMM");
}

/// Transposed plans gather the values on every call, so their key leaves the values out.
template <typename T> SpmmPlanKey key_of(CsrView<T> a, std::int64_t width, bool transpose) {
  return {a.handle, a.first_row, a.rows, a.cols, width, a.col, transpose ? nullptr : a.val,
          transpose};
}

/// The cached plan of `a` made by `make`, or for a view of no CsrT (nothing tells when its
/// arrays die) a plan of this call alone, kept in `once`.
template <typename T, typename Make>
SpmmPlan& plan_for(const CudaBackend& be, CsrView<T> a, std::int64_t width, bool transpose,
                   std::unique_ptr<SpmmPlan>& once, Make make) {
  if (a.handle != 0) return be.plan<SpmmPlan>(key_of(a, width, transpose), make);
  once.reset(make());
  return *once;
}

/// Waits for the product before a one-call plan (its workspace) is freed.
void finish(const CudaBackend& be, const std::unique_ptr<SpmmPlan>& once) {
  if (once != nullptr) TESSERA_CUDA_CHECK(cudaStreamSynchronize(be.stream()));
}

} // namespace

template <typename T>
void spmm(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c, T beta) {
  const auto& be = as_cuda(backend);
  if (c.size() == 0) return;
  if (b.rows == 0) { // no columns to read: the product is zero
    scale_output(be, c.data, c.size(), beta);
    return;
  }
  std::unique_ptr<SpmmPlan> once;
  SpmmPlan& plan = plan_for(be, a, b.cols, false, once,
                            [&] { return make_plan(be, a, b.data, c.data, b.cols); });
  run(be, plan, b.data, c.data, c.size(), beta);
  finish(be, once);
}

void spmm_bf16(const Backend& backend, CsrView<float> a, ConstDenseView<Bf16> b,
               DenseView<float> c) {
  if (a.rows == 0 || c.cols == 0) return;
  // Our own kernel: cuSPARSE's SpMM takes B and C of one type.
  launch::spmm_bf16(a.row_ptr, a.col, a.val, reinterpret_cast<const std::uint16_t*>(b.data), c.data,
                    a.rows, c.cols, as_cuda(backend).stream());
  check_launch("spmm_bf16");
}

template <typename T>
void spmm_transpose(const Backend& backend, CsrView<T> a, ConstDenseView<T> b, DenseView<T> c) {
  const auto& be = as_cuda(backend);
  if (c.size() == 0) return;
  if (a.rows == 0) {
    be.zero_bytes(c.data, static_cast<std::size_t>(c.size()) * sizeof(T));
    return;
  }
  std::unique_ptr<SpmmPlan> once;
  SpmmPlan& plan = plan_for(be, a, b.cols, true, once,
                            [&] { return make_transposed_plan(be, a, b.data, c.data, b.cols); });
  if (plan.nnz > 0) {
    launch::permute_values(a.val + plan.base, static_cast<const std::int64_t*>(plan.perm.get()),
                           static_cast<T*>(plan.values.get()), plan.nnz, be.stream());
    check_launch("permute_values");
  }
  run(be, plan, b.data, c.data, c.size(), T{0});
  finish(be, once);
}

TESSERA_INSTANTIATE_SPMM_KERNELS(float);
TESSERA_INSTANTIATE_SPMM_KERNELS(double);

} // namespace tessera::kernels::cuda
