// Halo plans and exchanges across real ranks: a hand-written 4-rank plan, gather contents, the
// adjoint identity of gather and scatter-add, the exchange in row blocks under a memory budget,
// and the one-off sparse row gather.
#include "mpi/mpi_test_main.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <random>
#include <tessera/tessera.hpp>
#include <tuple>

namespace tessera {
namespace {

using comm::HaloExchange;
using comm::HaloPlan;
using testing::world;

/// This rank's tile of a generated graph cut by the random method (the same on every rank).
partition::LocalGraph random_tile(int nodes, std::uint64_t seed) {
  const auto backend = make_cpu_backend(1);
  const auto data = datasets::load_dataset(
      backend, "sbm:nodes=" + std::to_string(nodes) + ",classes=4,avg-degree=6,p-in=0.6,features=8",
      {"", 0, seed});
  partition::Options options;
  options.num_parts = world()->size();
  options.method = partition::Method::Random;
  options.seed = seed;
  return partition::build_local_graph(data, partition::partition_graph(data.adjacency, options),
                                      world()->rank());
}

std::shared_ptr<const HaloPlan> plan_of(const partition::LocalGraph& tile) {
  return std::make_shared<const HaloPlan>(
      HaloPlan::build(*world(), tile.owned_ids, tile.ghost_ids, tile.ghost_owner));
}

// Rank r owns the global ids below; ghosts are listed by owner. Rank 1 stores its rows out of
// id order, so the plan must map ids to local rows rather than assume sorted owned ids.
struct HandTile {
  std::vector<GlobalId> owned, ghosts;
  std::vector<std::int32_t> owners;
};
const HandTile kHandTiles[4] = {
    {{0, 1, 2}, {3, 6, 9}, {1, 2, 3}},
    {{5, 3, 4}, {1, 2, 7}, {0, 0, 2}},
    {{6, 7}, {2, 5}, {0, 1}},
    {{8, 9}, {0}, {0}},
};

TEST(HaloPlan, HandWrittenFourRankPlanSendsWhatEachPeerReads) {
  if (world()->size() != 4) GTEST_SKIP() << "needs exactly 4 ranks";
  const HandTile& t = kHandTiles[world()->rank()];

  const HaloPlan plan = HaloPlan::build(*world(), t.owned, t.ghosts, t.owners);

  using Block = std::tuple<int, std::int64_t, std::int64_t>;
  std::vector<Block> send, recv;
  for (const auto& b : plan.send_blocks())
    send.emplace_back(b.peer, b.begin, b.count);
  for (const auto& b : plan.recv_blocks())
    recv.emplace_back(b.peer, b.begin, b.count);
  const std::vector<std::vector<LocalId>> expected_rows = {{1, 2, 2, 0}, {1, 0}, {0, 1}, {1}};
  const std::vector<std::vector<Block>> expected_send = {{{1, 0, 2}, {2, 2, 1}, {3, 3, 1}},
                                                         {{0, 0, 1}, {2, 1, 1}},
                                                         {{0, 0, 1}, {1, 1, 1}},
                                                         {{0, 0, 1}}};
  const std::vector<std::vector<Block>> expected_recv = {{{1, 0, 1}, {2, 1, 1}, {3, 2, 1}},
                                                         {{0, 0, 2}, {2, 2, 1}},
                                                         {{0, 0, 1}, {1, 1, 1}},
                                                         {{0, 0, 1}}};
  EXPECT_EQ(plan.send_rows(), expected_rows[world()->rank()]);
  EXPECT_EQ(send, expected_send[world()->rank()]);
  EXPECT_EQ(recv, expected_recv[world()->rank()]);
}

TEST(HaloPlan, HandWrittenFourRankGatherCopiesOwnerRows) {
  if (world()->size() != 4) GTEST_SKIP() << "needs exactly 4 ranks";
  const HandTile& t = kHandTiles[world()->rank()];
  const auto backend = make_cpu_backend(1);
  auto plan =
      std::make_shared<const HaloPlan>(HaloPlan::build(*world(), t.owned, t.ghosts, t.owners));
  Dense x = Dense::zeros(backend, plan->n_local(), 3);
  for (std::size_t r = 0; r < t.owned.size(); ++r)
    for (int c = 0; c < 3; ++c)
      x(static_cast<std::int64_t>(r), c) = static_cast<float>(10 * t.owned[r] + c);

  HaloExchange<float>(world(), plan, backend, 1).gather(x.view());

  for (std::size_t g = 0; g < t.ghosts.size(); ++g) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(x(plan->n_owned() + static_cast<std::int64_t>(g), c),
                static_cast<float>(10 * t.ghosts[g] + c));
    }
  }
}

TEST(HaloPlan, GhostOwnedByThisRankIsRefused) {
  const std::vector<GlobalId> owned{0}, ghosts{1};
  const std::vector<std::int32_t> owners{world()->rank()};

  EXPECT_THROW(HaloPlan::build(*world(), owned, ghosts, owners), InvalidArgument);
}

TEST(HaloExchange, GatherThenScatterAddIsAdjoint) {
  const partition::LocalGraph tile = random_tile(500, 3);
  const auto plan = plan_of(tile);
  const auto backend = make_cpu_backend(1);
  HaloExchange<double> halo(world(), plan, backend, 2);
  const std::int64_t n_owned = plan->n_owned(), n_local = plan->n_local(), width = 5;
  std::mt19937 rng(static_cast<unsigned>(17 + world()->rank()));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  DenseT<double> x = DenseT<double>::zeros(backend, n_local, width); // owned rows random
  DenseT<double> y(backend, n_local, width);                         // every row random
  for (std::int64_t r = 0; r < n_local; ++r)
    for (std::int64_t c = 0; c < width; ++c) {
      if (r < n_owned) x(r, c) = uniform(rng);
      y(r, c) = uniform(rng);
    }
  DenseT<double> x_owned = DenseT<double>::zeros(backend, n_owned, width);
  for (std::int64_t i = 0; i < n_owned * width; ++i)
    x_owned.data()[i] = x.data()[i];

  halo.gather(x.view());       // x = G · x_owned on all local rows
  double sums[2] = {0.0, 0.0}; // <G x, y> over local rows; <x, Gᵀ y> over owned rows
  for (std::int64_t i = 0; i < n_local * width; ++i)
    sums[0] += x.data()[i] * y.data()[i];
  halo.scatter_add(y.view()); // owned rows of y = Gᵀ · y
  for (std::int64_t i = 0; i < n_owned * width; ++i)
    sums[1] += x_owned.data()[i] * y.data()[i];
  world()->allreduce_sum(std::span<double>(sums));

  EXPECT_NEAR(sums[0], sums[1], 1e-12 * std::abs(sums[0]));
  EXPECT_EQ(halo.stats().exchanges, 2);
  if (world()->size() > 1) {
    EXPECT_GT(plan->n_ghost(), 0);
  }
}

TEST(HaloExchange, CompressedMessagesStayWithinTheirBoundsAndCarryFewerBytes) {
  if (world()->size() < 2) GTEST_SKIP() << "needs peers";
  const partition::LocalGraph tile = random_tile(500, 5);
  const auto plan = plan_of(tile);
  const auto backend = make_cpu_backend(1);
  const std::int64_t n_owned = plan->n_owned(), n_local = plan->n_local(), width = 24;
  std::mt19937 rng(static_cast<unsigned>(29 + world()->rank()));
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  DenseT<float> x = DenseT<float>::zeros(backend, n_local, width); // every row random
  for (std::int64_t i = 0; i < x.size(); ++i)
    x.data()[i] = uniform(rng);

  // gather and scatter-add of x in one precision: the results and the bytes sent.
  const auto run = [&](comm::HaloPrecision precision) {
    HaloExchange<float> halo(world(), plan, backend, 3);
    halo.set_precision(precision, 11);
    DenseT<float> gathered = to_backend(x, backend), summed = to_backend(x, backend);
    halo.gather(gathered.view());
    halo.scatter_add(summed.view());
    return std::tuple{std::move(gathered), std::move(summed), halo.stats().bytes_sent};
  };
  const auto [g32, s32, b32] = run(comm::HaloPrecision::Fp32);
  const auto [g16, s16, b16] = run(comm::HaloPrecision::Bf16);
  const auto [g8, s8, b8] = run(comm::HaloPrecision::Int8);
  const auto [g8_again, s8_again, b8_again] = run(comm::HaloPrecision::Int8);

  // A row's int8 step is at most 2/127 (|values| < 2); a scatter-add sums at most P - 1 shares.
  const float peers = static_cast<float>(world()->size() - 1);
  for (std::int64_t i = 0; i < n_local * width; ++i) {
    EXPECT_LE(std::abs(g16.data()[i] - g32.data()[i]), std::ldexp(2.0f, -8)) << i;
    EXPECT_LE(std::abs(g8.data()[i] - g32.data()[i]), 2.0f / 127.0f * 1.001f) << i;
    if (i < n_owned * width) {
      EXPECT_LE(std::abs(s16.data()[i] - s32.data()[i]), peers * std::ldexp(2.0f, -8) + 1e-6f);
      EXPECT_LE(std::abs(s8.data()[i] - s32.data()[i]), peers * 2.0f / 127.0f * 1.001f + 1e-6f);
    }
  }
  EXPECT_TRUE(std::equal(g8.data(), g8.data() + g8.size(), g8_again.data())); // repeatable
  EXPECT_TRUE(std::equal(s8.data(), s8.data() + s8.size(), s8_again.data()));
  // Per row: 4 bytes a value; bf16 2; int8 1 and the row's scale.
  const std::int64_t rows = plan->num_send_rows() + plan->n_ghost();
  EXPECT_EQ(b32, rows * width * 4);
  EXPECT_EQ(b16, rows * width * 2);
  EXPECT_EQ(b8, rows * (width + 4));
}

TEST(HaloInBlocks, UnderATinyBudgetMovesWhatTheWholeExchangeMovesAndRanksMayMixThem) {
  // Reference: every rank gathers, then scatter-adds, whole. Then the same with the matrix in
  // chunks under a budget of a few blocks, the even ranks in row blocks and the odd ranks
  // whole (their messages must be interchangeable): the same values, bit for bit.
  const partition::LocalGraph tile = random_tile(2000, 11);
  const auto plan = plan_of(tile);
  const auto backend = make_cpu_backend(1);
  const std::int64_t n_local = plan->n_local(), width = 8;
  std::mt19937 rng(static_cast<unsigned>(5 + world()->rank()));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(n_local * width));
  for (double& v : x)
    v = uniform(rng);
  const auto exchange_whole = [&](DenseView<double> m, HaloExchange<double>& halo) {
    halo.gather(m);
    for (std::int64_t i = 0; i < m.size(); ++i)
      m.data[i] = 2.0 * m.data[i] + 1.0; // every row differs from what was gathered
    halo.scatter_add(m);
  };
  DenseT<double> whole(backend, n_local, width);
  std::copy(x.begin(), x.end(), whole.data());
  HaloExchange<double> reference(world(), plan, backend, 4);
  exchange_whole(whole.view(), reference);

  OffloadConfig config;
  config.chunk_bytes = std::size_t{4} << 10;
  config.device_bytes = std::size_t{32} << 10; // blocks of 4 KiB: 64 rows of 8 doubles
  ChunkManager memory(backend, config);
  const BackendPtr managed = memory.allocator(TensorKind::Activation);
  DenseT<double> chunked(managed, n_local, width);
  managed->copy_from_host(chunked.data(), x.data(), x.size() * sizeof(double));
  std::vector<double> got(x.size());
  if (world()->rank() % 2 == 0) {
    const auto exchange = comm::make_layer_exchange<double>(world(), plan, backend, 0, {});
    HaloInBlocks<double> blocks(*exchange);
    blocks.gather(memory, chunked.view(), comm::Pass::Training);
    managed->copy_to_host(got.data(), chunked.data(), got.size() * sizeof(double));
    for (double& v : got)
      v = 2.0 * v + 1.0;
    managed->copy_from_host(chunked.data(), got.data(), got.size() * sizeof(double));
    blocks.scatter_add(memory, chunked.view());
    managed->copy_to_host(got.data(), chunked.data(), got.size() * sizeof(double));
  } else {
    DenseT<double> plain(backend, n_local, width);
    std::copy(x.begin(), x.end(), plain.data());
    HaloExchange<double> halo(world(), plan, backend, comm::tags::layer(0));
    exchange_whole(plain.view(), halo);
    std::copy_n(plain.data(), got.size(), got.begin());
  }

  EXPECT_EQ(got, std::vector<double>(whole.data(), whole.data() + whole.size()));
  if (world()->rank() % 2 == 0) {
    EXPECT_LE(memory.total().peak_device_bytes, config.device_bytes);
    EXPECT_GT(memory.total().peak_tensor_bytes, 2 * config.device_bytes);
  }
  if (world()->size() > 1) {
    EXPECT_GT(plan->n_ghost(), 0);
  }
}

TEST(HaloExchange, SparseRowGatherMatchesTheDenseGather) {
  const partition::LocalGraph tile = random_tile(400, 5);
  const auto plan = plan_of(tile);
  const auto backend = make_cpu_backend(1);
  // Sparse owned rows: a few nonzeros per row, some rows empty.
  const std::int64_t n_owned = plan->n_owned(), width = 7;
  Dense dense = Dense::zeros(backend, plan->n_local(), width);
  std::vector<Offset> row_ptr{0};
  std::vector<LocalId> cols;
  std::vector<float> vals;
  for (std::int64_t r = 0; r < n_owned; ++r) {
    const GlobalId id = tile.owned_ids[r];
    for (int c = 0; c < width; ++c) {
      if ((id + c) % 3 != 0) continue;
      cols.push_back(c);
      vals.push_back(static_cast<float>(id) + 0.25f * c);
      dense(r, c) = vals.back();
    }
    row_ptr.push_back(static_cast<Offset>(cols.size()));
  }
  Csr owned(backend, n_owned, width, static_cast<std::int64_t>(cols.size()));
  std::copy(row_ptr.begin(), row_ptr.end(), owned.row_ptr());
  std::copy(cols.begin(), cols.end(), owned.col());
  std::copy(vals.begin(), vals.end(), owned.val());

  const Csr local = comm::gather_sparse_rows(*world(), *plan, owned);
  HaloExchange<float>(world(), plan, backend, 3).gather(dense.view());

  ASSERT_EQ(local.rows(), plan->n_local());
  for (std::int64_t r = 0; r < local.rows(); ++r) {
    std::vector<float> row(width, 0.0f);
    for (Offset k = local.row_ptr()[r]; k < local.row_ptr()[r + 1]; ++k)
      row[local.col()[k]] = local.val()[k];
    for (int c = 0; c < width; ++c)
      ASSERT_EQ(row[c], dense(r, c)) << "row " << r << " col " << c;
  }
}

// ---- Layer exchanges in their modes (exact, stale, skip) ----

/// A value that names its global row, epoch and column.
double value_of(GlobalId id, double epoch, std::int64_t col) {
  return 100.0 * static_cast<double>(id) + epoch + 0.001 * static_cast<double>(col);
}

constexpr std::int64_t kWidth = 3;

/// [n_local, kWidth] with the owned rows given by `owned(id, col)` and the ghost rows by
/// `ghost(id, col)`.
template <typename Owned, typename Ghost>
DenseT<double> rows_of(const partition::LocalGraph& tile, Owned owned, Ghost ghost) {
  DenseT<double> x(make_cpu_backend(1), tile.n_owned() + tile.n_ghost(), kWidth);
  for (std::int64_t r = 0; r < tile.n_owned(); ++r)
    for (std::int64_t c = 0; c < kWidth; ++c)
      x(r, c) = owned(tile.owned_ids[r], c);
  for (std::int64_t g = 0; g < tile.n_ghost(); ++g)
    for (std::int64_t c = 0; c < kWidth; ++c)
      x(tile.n_owned() + g, c) = ghost(tile.ghost_ids[g], c);
  return x;
}

/// Ghost rows of x that differ from `expected(id, col)`, for messages.
template <typename Expected>
int wrong_ghost_rows(const partition::LocalGraph& tile, const DenseT<double>& x,
                     Expected expected) {
  int wrong = 0;
  for (std::int64_t g = 0; g < tile.n_ghost(); ++g) {
    for (std::int64_t c = 0; c < kWidth; ++c) {
      if (x(tile.n_owned() + g, c) != expected(tile.ghost_ids[g], c)) {
        ++wrong;
        break;
      }
    }
  }
  return wrong;
}

std::vector<double> owned_rows(const partition::LocalGraph& tile, const DenseT<double>& x) {
  return std::vector<double>(x.data(), x.data() + tile.n_owned() * kWidth);
}

/// One gather or scatter-add through `exchange`, begun and ended at once.
void gather(comm::LayerExchange<double>& exchange, DenseT<double>& x, comm::Pass pass) {
  exchange.begin_gather(x.view(), pass);
  exchange.end_gather();
}
void scatter_add(comm::LayerExchange<double>& exchange, DenseT<double>& dx) {
  exchange.begin_scatter_add(dx.view());
  exchange.end_scatter_add();
}

const auto kNan = [](GlobalId, std::int64_t) { return std::nan(""); };
const auto kZero = [](GlobalId, std::int64_t) { return 0.0; };

/// One training step's gather and scatter-add through two exchanges side by side: the owned
/// rows and the ghost rows' shares given by `rows(id, col)`; what each delivered.
struct SideBySide {
  DenseT<double> gathered[2]; // ghost rows filled (NaN before)
  DenseT<double> added[2];    // owned rows with the peers' shares added (0 before)
};
template <typename Rows>
SideBySide side_by_side(const partition::LocalGraph& tile, comm::LayerExchange<double>& first,
                        comm::LayerExchange<double>& second, Rows rows) {
  SideBySide e{{rows_of(tile, rows, kNan), rows_of(tile, rows, kNan)},
               {rows_of(tile, kZero, rows), rows_of(tile, kZero, rows)}};
  gather(first, e.gathered[0], comm::Pass::Training);
  gather(second, e.gathered[1], comm::Pass::Training);
  scatter_add(first, e.added[0]);
  scatter_add(second, e.added[1]);
  return e;
}

TEST(LayerExchange, StaleGatherDeliversTheEpochBeforesRowsAndEvaluationThisEpochs) {
  const partition::LocalGraph tile = random_tile(2000, 13);
  const auto plan = plan_of(tile);
  comm::ExchangeOptions options;
  options.mode = comm::HaloMode::Stale;
  options.smoothing = 0; // the rows as received
  const auto stale =
      comm::make_layer_exchange<double>(world(), plan, make_cpu_backend(1), 0, options);

  for (int epoch = 1; epoch <= 4; ++epoch) {
    const auto now = [epoch](GlobalId id, std::int64_t c) { return value_of(id, epoch, c); };
    DenseT<double> trained = rows_of(tile, now, kNan), evaluated = rows_of(tile, now, kNan);
    gather(*stale, trained, comm::Pass::Training);
    gather(*stale, evaluated, comm::Pass::Evaluation);

    const int delivered = epoch == 1 ? 1 : epoch - 1; // the first epoch is exact
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    EXPECT_EQ(
        wrong_ghost_rows(tile, trained,
                         [=](GlobalId id, std::int64_t c) { return value_of(id, delivered, c); }),
        0);
    EXPECT_EQ(wrong_ghost_rows(tile, evaluated, now), 0);
  }
}

TEST(LayerExchange, StaleScatterAddAddsTheEpochBeforesSharesAndSmoothingAveragesThem) {
  // Reference: the exact scatter-add of every epoch's shares. The stale exchange adds those of
  // the epoch before (the first epoch's at once); smoothed by s = 0.5, the running average.
  const partition::LocalGraph tile = random_tile(2000, 17);
  const auto plan = plan_of(tile);
  const auto backend = make_cpu_backend(1);
  const auto exact = comm::make_layer_exchange<double>(world(), plan, backend, 2, {});
  comm::ExchangeOptions options;
  options.mode = comm::HaloMode::Stale;
  options.smoothing = 0;
  const auto stale = comm::make_layer_exchange<double>(world(), plan, backend, 0, options);
  options.smoothing = 0.5;
  const auto smoothed = comm::make_layer_exchange<double>(world(), plan, backend, 1, options);
  std::vector<std::vector<double>> reference;
  std::vector<double> average;

  for (int epoch = 1; epoch <= 4; ++epoch) {
    const auto shares = [epoch](GlobalId id, std::int64_t c) { return value_of(id, epoch, c); };
    DenseT<double> dx = rows_of(tile, kZero, shares);
    scatter_add(*exact, dx);
    reference.push_back(owned_rows(tile, dx));
    DenseT<double> dx_stale = rows_of(tile, kZero, shares);
    scatter_add(*stale, dx_stale);
    DenseT<double> dx_smoothed = rows_of(tile, kZero, shares);
    scatter_add(*smoothed, dx_smoothed);

    const std::vector<double>& delivered = reference[epoch == 1 ? 0 : epoch - 2];
    if (epoch <= 2) {
      average = delivered;
    } else {
      for (std::size_t i = 0; i < average.size(); ++i)
        average[i] = average[i] + 0.5 * (delivered[i] - average[i]);
    }
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    EXPECT_EQ(owned_rows(tile, dx_stale), delivered);
    // Smoothed share by share, then summed: the same sum in another order.
    EXPECT_THAT(owned_rows(tile, dx_smoothed),
                ::testing::Pointwise(::testing::DoubleNear(1e-9), average));
  }
}

TEST(LayerExchange, SkipAtThresholdZeroIsExactAndMovesOnlyTheRowsThatChanged) {
  // Half the rows (odd global ids) change every epoch, the others never: at τ = 0 the skip
  // exchange delivers exactly what the exact one does, in both directions, and after the
  // first epoch re-sends only the changing half.
  const partition::LocalGraph tile = random_tile(2000, 19);
  const auto plan = plan_of(tile);
  const auto backend = make_cpu_backend(1);
  const auto exact = comm::make_layer_exchange<double>(world(), plan, backend, 1, {});
  comm::ExchangeOptions options;
  options.mode = comm::HaloMode::Skip;
  options.skip_max_age = 1000;
  const auto skip = comm::make_layer_exchange<double>(world(), plan, backend, 0, options);

  for (int epoch = 1; epoch <= 4; ++epoch) {
    const auto rows = [epoch](GlobalId id, std::int64_t c) {
      return value_of(id, id % 2 == 1 ? epoch : 0, c);
    };
    const SideBySide e = side_by_side(tile, *exact, *skip, rows);

    SCOPED_TRACE("epoch " + std::to_string(epoch));
    EXPECT_EQ(wrong_ghost_rows(tile, e.gathered[1], rows), 0);
    EXPECT_EQ(owned_rows(tile, e.added[1]), owned_rows(tile, e.added[0]));
  }

  // Bytes: every row in the first epoch, about half in the three others (and the bitmaps).
  const double exact_bytes = static_cast<double>(exact->stats().bytes_sent);
  const double skip_bytes = static_cast<double>(skip->stats().bytes_sent);
  if (plan->num_send_rows() > 100) {
    EXPECT_NEAR(skip_bytes / exact_bytes, (1.0 + 3 * 0.5) / 4, 0.08);
  }
}

TEST(LayerExchange, SkipWithBf16RowsAtThresholdZeroDeliversWhatExactBf16Does) {
  // Compressed rows take the encoding path (fp32 rows travel as they are): what the receivers
  // hold is the decoded row, in both directions, exactly as an exact bf16 exchange delivers it.
  const partition::LocalGraph tile = random_tile(2000, 37);
  const auto plan = plan_of(tile);
  const auto backend = make_cpu_backend(1);
  comm::ExchangeOptions options;
  options.precision = comm::HaloPrecision::Bf16;
  const auto exact = comm::make_layer_exchange<double>(world(), plan, backend, 1, options);
  options.mode = comm::HaloMode::Skip;
  const auto skip = comm::make_layer_exchange<double>(world(), plan, backend, 0, options);

  for (int epoch = 1; epoch <= 3; ++epoch) {
    const auto rows = [epoch](GlobalId id, std::int64_t c) {
      return value_of(id, id % 3 == 0 ? epoch : 0, c);
    };
    const SideBySide e = side_by_side(tile, *exact, *skip, rows);

    SCOPED_TRACE("epoch " + std::to_string(epoch));
    const auto all_rows = [](const DenseT<double>& x) {
      return std::vector<double>(x.data(), x.data() + x.rows() * x.cols());
    };
    EXPECT_EQ(all_rows(e.gathered[0]), all_rows(e.gathered[1]));
    if (tile.n_ghost() > 0) {
      EXPECT_GT(wrong_ghost_rows(tile, e.gathered[1], rows), 0); // rounded to bf16
    }
    EXPECT_EQ(owned_rows(tile, e.added[1]), owned_rows(tile, e.added[0]));
  }
}

TEST(LayerExchange, SkipResendsADriftedRowAtOnceAndASteadyOneAtLeastEveryMaxAgeEpochs) {
  // Odd ids grow by ≥ 1/6 an epoch (past τ = 0.1), even ids by 0.1 % (under it): the odd rows
  // arrive every epoch, the even ones at epochs 1, 4 and 7 (max age 3).
  const partition::LocalGraph tile = random_tile(2000, 23);
  const auto plan = plan_of(tile);
  comm::ExchangeOptions options;
  options.mode = comm::HaloMode::Skip;
  options.skip_threshold = 0.1;
  options.skip_max_age = 3;
  const auto skip =
      comm::make_layer_exchange<double>(world(), plan, make_cpu_backend(1), 0, options);
  const auto row_at = [](GlobalId id, int epoch, std::int64_t c) {
    const double growth = id % 2 == 1 ? epoch : 1.0 + 0.001 * epoch;
    return value_of(id, 0, c) * growth;
  };

  for (int epoch = 1; epoch <= 7; ++epoch) {
    DenseT<double> x = rows_of(
        tile, [&](GlobalId id, std::int64_t c) { return row_at(id, epoch, c); }, kNan);
    gather(*skip, x, comm::Pass::Training);

    const int steady_sent = 1 + 3 * ((epoch - 1) / 3);
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    EXPECT_EQ(wrong_ghost_rows(tile, x,
                               [&](GlobalId id, std::int64_t c) {
                                 return row_at(id, id % 2 == 1 ? epoch : steady_sent, c);
                               }),
              0);
  }
}

TEST(LayerExchange, ABeginWhileAnotherIsOpenAndAnEndWithoutBeginAreRefused) {
  const partition::LocalGraph tile = random_tile(400, 29);
  const auto plan = plan_of(tile);
  for (const comm::HaloMode mode :
       {comm::HaloMode::Exact, comm::HaloMode::Stale, comm::HaloMode::Skip}) {
    SCOPED_TRACE(comm::to_string(mode));
    comm::ExchangeOptions options;
    options.mode = mode;
    const auto exchange =
        comm::make_layer_exchange<double>(world(), plan, make_cpu_backend(1), 0, options);
    DenseT<double> x = rows_of(tile, kZero, kZero);

    EXPECT_THROW(exchange->end_gather(), InvalidArgument);
    exchange->begin_gather(x.view(), comm::Pass::Training);
    EXPECT_THAT([&] { exchange->begin_scatter_add(x.view()); },
                ::testing::ThrowsMessage<InvalidArgument>(
                    ::testing::HasSubstr("scatter-add begun while a gather is open")));
    EXPECT_THROW(exchange->end_scatter_add(), InvalidArgument);
    exchange->end_gather();
  }
}

/// Rates fixed by hand: SpMM at 10 GB/s, GEMMs at 50 GFLOP/s, copies at 10 GB/s, bf16 and int8
/// encoding at 5 GB/s.
gnn::RankRates fixed_rates() {
  gnn::RankRates rates;
  rates.spmm_gbps = {{32, 10.0}};
  rates.gemm_gflops = 50.0;
  rates.copy_gbps = 10.0;
  rates.encode_gbps[1] = 5.0;
  rates.encode_gbps[2] = 5.0;
  return rates;
}

TEST(CostModel, PredictsWhatASlowerLinkCostsWhatStaleHidesAndWhatBf16Halves) {
  if (world()->size() == 1) GTEST_SKIP() << "one rank exchanges no halo";
  const partition::LocalGraph tile = random_tile(2000, 31);
  const auto plan = plan_of(tile);
  const gnn::RankRates rates = fixed_rates();
  const auto model_over = [&](double gbps) {
    std::vector<comm::LinkEstimate> links;
    for (int peer = 0; peer < world()->size(); ++peer) {
      if (peer != world()->rank()) links.push_back({peer, 0.0, gbps});
    }
    return gnn::CostModel(rates, links, plan, plan->n_owned(), plan->n_local(), 0, 20000);
  };
  gnn::LayerShape layer;
  layer.in = layer.out = 32;
  layer.has_halo = true;
  layer.input_rows = plan->n_owned();
  comm::ExchangeOptions exact, stale, bf16;
  stale.mode = comm::HaloMode::Stale;
  bf16.precision = comm::HaloPrecision::Bf16;

  const gnn::CostModel slow = model_over(0.01), fast = model_over(100.0);
  const gnn::LayerPrediction slow_exact = slow.predict(layer, exact);
  const gnn::LayerPrediction fast_exact = fast.predict(layer, exact);
  const gnn::LayerPrediction slow_bf16 = slow.predict(layer, bf16);
  const gnn::LayerPrediction slow_stale = slow.predict(layer, stale, 1e6);

  ASSERT_GT(plan->num_send_rows() + plan->n_ghost(), 0);
  EXPECT_EQ(slow_exact.compute_ms, fast_exact.compute_ms);
  EXPECT_NEAR(slow_exact.transfer_ms / fast_exact.transfer_ms, 1e4, 1e4 * 0.01);
  EXPECT_GT(slow_exact.wait_ms, fast_exact.wait_ms);
  EXPECT_NEAR(slow_bf16.transfer_ms / slow_exact.transfer_ms, 0.5, 0.01);
  EXPECT_GT(slow_bf16.compute_ms, slow_exact.compute_ms); // encoding costs
  EXPECT_EQ(slow_stale.wait_ms, 0.0);
  const comm::ExchangeOptions candidates[] = {exact, stale, bf16};
  EXPECT_EQ(slow.choose(layer, candidates, 1e6).mode, comm::HaloMode::Stale);
  EXPECT_EQ(fast.choose(layer, candidates, 1e6).mode, comm::HaloMode::Exact);
  EXPECT_EQ(fast.choose(layer, candidates, 1e6).precision, comm::HaloPrecision::Fp32);
}

TEST(Scheduler, GivesEachLayerThePlanItsSlowestRankRunsFastestAndEveryRankTheSame) {
  if (world()->size() == 1) GTEST_SKIP() << "one rank exchanges no halo";
  const partition::LocalGraph tile = random_tile(2000, 31);
  const auto plan = plan_of(tile);
  const gnn::RankRates rates = fixed_rates();
  // Rank 0's link is the slow one: every rank must still take the plan rank 0 needs.
  const double gbps = world()->rank() == 0 ? 0.01 : 100.0;
  std::vector<comm::LinkEstimate> links;
  for (int peer = 0; peer < world()->size(); ++peer) {
    if (peer != world()->rank()) links.push_back({peer, 0.0, gbps});
  }
  const gnn::CostModel model(rates, links, plan, plan->n_owned(), plan->n_local(), 0, 20000);
  gnn::ScheduleRequest request;
  request.layer_sizes = {64, 32, 8};
  request.n_owned = plan->n_owned();
  request.n_local = plan->n_local();
  const comm::HaloMode stale[] = {comm::HaloMode::Stale};
  const comm::HaloPrecision bf16[] = {comm::HaloPrecision::Bf16};
  request.candidates = gnn::exchange_candidates(comm::ExchangeOptions{}, stale, bf16);
  ASSERT_EQ(request.candidates.size(), 4u); // exact and stale, each in fp32 and bf16
  EXPECT_EQ(request.candidates[0].mode, comm::HaloMode::Exact);
  EXPECT_EQ(request.candidates[0].precision, comm::HaloPrecision::Fp32);

  const std::vector<gnn::LayerPlan> plans = gnn::schedule_layers(request, model, *world());
  ASSERT_EQ(plans.size(), 2u);
  // Layer 0 reads cached ghost inputs: no halo, so the exact plan (the first) stays.
  EXPECT_FALSE(plans[0].shape.has_halo);
  EXPECT_FALSE(plans[0].inexact());
  // Layer 1's halo crawls on rank 0's link: inexact beats exact by far more than the margin.
  EXPECT_TRUE(plans[1].inexact());
  EXPECT_FALSE(plans[0].other_order_ms.has_value());
  std::vector<double> mine{static_cast<double>(plans[1].exchange.mode),
                           static_cast<double>(plans[1].exchange.precision), plans[1].slowest_ms};
  std::vector<double> most = mine;
  world()->allreduce_max(std::span<double>(most));
  EXPECT_EQ(mine, most); // the same plan and the same slowest time on every rank

  // With a fast link everywhere the exact plan wins (ties and the margin favour it).
  std::vector<comm::LinkEstimate> fast_links = links;
  for (comm::LinkEstimate& link : fast_links)
    link.gigabits_per_second = 100.0;
  const gnn::CostModel fast(rates, fast_links, plan, plan->n_owned(), plan->n_local(), 0, 20000);
  for (const gnn::LayerPlan& p : gnn::schedule_layers(request, fast, *world()))
    EXPECT_FALSE(p.inexact());

  // Both orders weighed: each layer says what the order not taken would cost.
  request.choose_order = true;
  for (const gnn::LayerPlan& p : gnn::schedule_layers(request, fast, *world()))
    EXPECT_TRUE(p.other_order_ms.has_value());
  request.order = GcnOrder::TransformThenAggregate;
  EXPECT_THROW(gnn::schedule_layers(request, fast, *world()), InvalidArgument);
}

} // namespace
} // namespace tessera
