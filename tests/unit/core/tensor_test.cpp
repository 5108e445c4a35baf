// Tensors own aligned backend memory and give views with the right shape.
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <gtest/gtest.h>
#include <vector>

namespace tessera {
namespace {

TEST(Dense, ZerosHasShapeAndIsZero) {
  const Dense m = Dense::zeros(make_cpu_backend(), 3, 5);

  EXPECT_EQ(m.rows(), 3);
  EXPECT_EQ(m.cols(), 5);
  EXPECT_EQ(m.shape(), "[3, 5]");
  for (std::int64_t i = 0; i < m.size(); ++i)
    EXPECT_EQ(m.data()[i], 0.0f);
}

TEST(Dense, LargeBuffersAreHugePageAligned) {
  const Dense big(make_cpu_backend(), 1024, 1024); // 4 MiB

  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.data()) % (2u << 20), 0u);
}

TEST(Dense, RowSliceViewsTheSameMemory) {
  Dense m = Dense::zeros(make_cpu_backend(), 4, 2);
  const DenseView<float> rows = m.view().slice_rows(1, 3);

  rows(0, 1) = 7.0f;

  EXPECT_EQ(rows.rows, 2);
  EXPECT_EQ(m(1, 1), 7.0f);
}

// Issue 37: a shape from a file whose product wraps (2^62 x 200 is 0 mod 2^64) must not become a
// small allocation that the writes past it overrun.
TEST(Dense, ShapeWhoseElementCountOverflowsIsRefusedNamingIt) {
  try {
    const Dense m(make_cpu_backend(), 200, std::int64_t{1} << 62);
    FAIL() << "expected a refusal";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[200, 4611686018427387904]"), std::string::npos)
        << e.what();
  }
}

TEST(Dense, ElementCountWhoseBytesOverflowIsRefused) {
  EXPECT_THROW(Buffer<float>(make_cpu_backend(), std::int64_t{1} << 62), InvalidArgument);
}

TEST(Dense, NegativeShapeThrowsInvalidArgument) {
  EXPECT_THROW(Dense(make_cpu_backend(), -1, 2), InvalidArgument);
}

TEST(Dense, MoveLeavesSourceEmpty) {
  Dense a = Dense::zeros(make_cpu_backend(), 2, 2);
  const float* data = a.data();

  Dense b = std::move(a);

  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(a.data(), nullptr); // NOLINT(bugprone-use-after-move): checking the moved-from state
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

TEST(Csr, HandlesAreUniqueNonZeroAndKeptByMovesAndViews) {
  const auto backend = make_cpu_backend(1);
  Csr a(backend, 3, 3, 0);
  const Csr b(backend, 3, 3, 0);
  const std::uint64_t handle = a.handle();

  const Csr moved(std::move(a));

  EXPECT_NE(handle, 0u);
  EXPECT_NE(b.handle(), handle);
  EXPECT_EQ(moved.handle(), handle);
  EXPECT_EQ(moved.view().handle, handle);
  EXPECT_EQ(a.handle(), 0u); // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(Csr().handle(), 0u);
}

TEST(Csr, CopiesGetANewHandle) {
  const auto backend = make_cpu_backend(1);
  const Csr a(backend, 2, 2, 0);

  EXPECT_NE(a.cast<double>().handle(), a.handle());
  EXPECT_NE(to_backend(a, backend).handle(), a.handle());
}

TEST(Csr, RowSliceKeepsTheHandleAndCountsRowsFromTheWholeMatrix) {
  const Csr a(make_cpu_backend(1), 10, 4, 0);

  const CsrView<float> inner = a.view().row_slice(3, 8).row_slice(2, 4);

  EXPECT_EQ(inner.handle, a.handle());
  EXPECT_EQ(inner.first_row, 5);
  EXPECT_EQ(inner.rows, 2);
  EXPECT_EQ(inner.row_ptr, a.row_ptr() + 5);
}

TEST(Csr, ReleaseSubscribersHearOfDestructionAndAssignmentUntilUnsubscribed) {
  const auto backend = make_cpu_backend(1);
  std::vector<std::uint64_t> released;
  std::uint64_t first = 0, second = 0;
  {
    const MatrixReleaseSubscription subscription(
        [&](std::uint64_t handle) { released.push_back(handle); });
    Csr a(backend, 2, 2, 0);
    first = a.handle();
    Csr b(backend, 2, 2, 0);
    second = b.handle();

    a = std::move(b); // a's first matrix is released; b's lives on in a
    EXPECT_EQ(released, std::vector<std::uint64_t>{first});
  }
  const std::vector<std::uint64_t> heard = released;
  { const Csr unheard(backend, 1, 1, 0); }

  EXPECT_EQ(heard, (std::vector<std::uint64_t>{first, second}));
  EXPECT_EQ(released, heard);
}

TEST(PinnedBuffer, HoldsWritableHostBytesAndMovesOwnership) {
  const auto backend = make_cpu_backend(1);
  PinnedBuffer a(backend, 100);
  std::fill_n(a.data(), a.size(), std::byte{3});

  const PinnedBuffer b(std::move(a));

  EXPECT_EQ(b.size(), 100u);
  EXPECT_EQ(b.data()[99], std::byte{3});
  EXPECT_EQ(a.data(), nullptr); // NOLINT(bugprone-use-after-move): checking the moved-from state
}

} // namespace
} // namespace tessera
