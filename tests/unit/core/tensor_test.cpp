// Tensors own aligned backend memory and give views with the right shape.
#include <gtest/gtest.h>

#include <cstdint>

#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"

namespace tessera {
namespace {

TEST(Dense, ZerosHasShapeAndIsZero) {
  const Dense m = Dense::zeros(make_cpu_backend(), 3, 5);

  EXPECT_EQ(m.rows(), 3);
  EXPECT_EQ(m.cols(), 5);
  EXPECT_EQ(m.shape(), "[3, 5]");
  for (std::int64_t i = 0; i < m.size(); ++i) EXPECT_EQ(m.data()[i], 0.0f);
}

TEST(Dense, LargeBuffersAreHugePageAligned) {
  const Dense big(make_cpu_backend(), 1024, 1024);  // 4 MiB

  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.data()) % (2u << 20), 0u);
}

TEST(Dense, RowSliceViewsTheSameMemory) {
  Dense m = Dense::zeros(make_cpu_backend(), 4, 2);
  const DenseView<float> rows = m.view().slice_rows(1, 3);

  rows(0, 1) = 7.0f;

  EXPECT_EQ(rows.rows, 2);
  EXPECT_EQ(m(1, 1), 7.0f);
}

TEST(Dense, NegativeShapeThrowsInvalidArgument) {
  EXPECT_THROW(Dense(make_cpu_backend(), -1, 2), InvalidArgument);
}

TEST(Dense, MoveLeavesSourceEmpty) {
  Dense a = Dense::zeros(make_cpu_backend(), 2, 2);
  const float* data = a.data();

  Dense b = std::move(a);

  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): checking the moved-from state
}

TEST(Tensor, EmptyMatricesCopyToABackendAsEmpty) {
  const auto backend = make_cpu_backend(1);

  EXPECT_TRUE(to_backend(Dense(), backend).empty());
  EXPECT_EQ(to_backend(Csr(), backend).rows(), 0);
  EXPECT_EQ(to_backend(Csr(), backend).nnz(), 0);
}

TEST(Csr, CastKeepsStructureAndConvertsValues) {
  Csr a(make_cpu_backend(), 2, 3, 2);
  a.row_ptr()[1] = 1;
  a.row_ptr()[2] = 2;
  a.col()[0] = 2;
  a.col()[1] = 0;
  a.val()[0] = 0.5f;
  a.val()[1] = 1.5f;

  const CsrT<double> b = a.cast<double>();

  EXPECT_EQ(b.nnz(), 2);
  EXPECT_EQ(b.row_ptr()[2], 2);
  EXPECT_EQ(b.col()[0], 2);
  EXPECT_DOUBLE_EQ(b.val()[1], 1.5);
}

}  // namespace
}  // namespace tessera
