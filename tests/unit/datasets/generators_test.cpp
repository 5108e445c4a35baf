// R-MAT and SBM generators, random splits and feature normalization.
#include "dataset_test_util.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <numeric>
#include <omp.h>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr const char* kRmat = "rmat:scale=12,edge-factor=8,features=16,classes=5";
constexpr const char* kSbm = "sbm:nodes=3000,classes=4,avg-degree=8,p-in=0.9,features=12,noise=0.5";

/// Loads `spec` with OpenMP limited to `threads`, restoring the previous limit.
Dataset load_with_threads(const std::string& spec, int threads, std::uint64_t seed = 3) {
  const int previous = omp_get_max_threads();
  omp_set_num_threads(threads);
  Dataset ds = load(spec, seed);
  omp_set_num_threads(previous);
  return ds;
}

TEST(DatasetsGenerators, RmatHasRequestedShapeAndSplit) {
  const Dataset ds = load(kRmat, 1);

  EXPECT_EQ(ds.num_nodes, 4096);
  EXPECT_GT(ds.adjacency.nnz(), 4096 * 8); // most of the 2 · 8 · 4096 directed entries survive
  ASSERT_TRUE(ds.features.dense.has_value());
  EXPECT_EQ(ds.features.cols(), 16);
  EXPECT_EQ(ds.num_classes, 5);
  EXPECT_EQ(ds.train_idx.size() + ds.val_idx.size() + ds.test_idx.size(), 4096u);
  EXPECT_EQ(ds.train_idx.size(), 2458u); // round(0.6 · 4096)
  EXPECT_EQ(ds.val_idx.size(), 819u);
  expect_canonical_adjacency(ds);
}

TEST(DatasetsGenerators, RmatIsAFunctionOfTheSeed) {
  const Dataset a = load(kRmat, 11);
  const Dataset b = load(kRmat, 11);
  const Dataset c = load(kRmat, 12);

  expect_same_dataset(a, b);
  EXPECT_NE(a.labels, c.labels);
  EXPECT_NE(a.adjacency.nnz(), c.adjacency.nnz());
}

TEST(DatasetsGenerators, RmatDoesNotDependOnThreadCount) {
  const Dataset one = load_with_threads(kRmat, 1);
  const Dataset two = load_with_threads(kRmat, 2);

  expect_same_dataset(one, two);
}

TEST(DatasetsGenerators, RmatPermutesIdsSoDegreeDoesNotFollowId) {
  const Dataset ds = load("rmat:scale=12,edge-factor=8,features=0,classes=2", 5);
  const Offset* row_ptr = ds.adjacency.row_ptr();
  std::vector<Offset> degree(static_cast<std::size_t>(ds.num_nodes));
  for (std::int64_t i = 0; i < ds.num_nodes; ++i)
    degree[i] = row_ptr[i + 1] - row_ptr[i];

  const auto hub = std::max_element(degree.begin(), degree.end()) - degree.begin();

  EXPECT_NE(hub, 0); // unpermuted R-MAT puts the largest hub at id 0
  EXPECT_EQ(ds.features.rows(), 0);
}

TEST(DatasetsGenerators, SbmDoesNotDependOnThreadCount) {
  const Dataset one = load_with_threads(kSbm, 1);
  const Dataset two = load_with_threads(kSbm, 2);

  expect_same_dataset(one, two);
}

TEST(DatasetsGenerators, SbmHasRequestedShapeBalancedClassesAndSplit) {
  const Dataset ds = load(kSbm, 2);
  std::vector<int> class_size(4, 0);
  for (const auto label : ds.labels)
    ++class_size[label];

  EXPECT_EQ(ds.num_nodes, 3000);
  EXPECT_EQ(ds.features.cols(), 12);
  EXPECT_EQ(ds.num_classes, 4);
  EXPECT_THAT(class_size, ::testing::Each(750));
  EXPECT_EQ(ds.train_idx.size(), 300u);
  EXPECT_EQ(ds.val_idx.size(), 300u);
  EXPECT_EQ(ds.test_idx.size(), 2400u);
  EXPECT_NEAR(static_cast<double>(ds.adjacency.nnz()) / 3000.0, 8.0, 0.5);
  expect_canonical_adjacency(ds);
}

TEST(DatasetsGenerators, SbmEdgesStayInsideClassesWithProbabilityPIn) {
  const Dataset ds = load(kSbm, 2);
  const Csr& a = ds.adjacency;
  std::int64_t inside = 0;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      inside += ds.labels[r] == ds.labels[a.col()[k]] ? 1 : 0;
    }
  }

  const double fraction = static_cast<double>(inside) / static_cast<double>(a.nnz());

  EXPECT_NEAR(fraction, 0.9 + 0.1 / 4, 0.02);
}

/// Per class, the mean of the feature rows of its members ([classes × features]).
std::vector<double> class_means(const Dataset& ds) {
  const std::int64_t f = ds.features.cols();
  std::vector<double> sums(static_cast<std::size_t>(ds.num_classes * f), 0.0);
  std::vector<double> counts(static_cast<std::size_t>(ds.num_classes), 0.0);
  for (std::int64_t i = 0; i < ds.num_nodes; ++i) {
    const auto c = static_cast<std::size_t>(ds.labels[static_cast<std::size_t>(i)]);
    counts[c] += 1.0;
    for (std::int64_t j = 0; j < f; ++j)
      sums[c * static_cast<std::size_t>(f) + static_cast<std::size_t>(j)] +=
          (*ds.features.dense)(i, j);
  }
  for (std::size_t k = 0; k < sums.size(); ++k)
    sums[k] /= counts[k / static_cast<std::size_t>(f)];
  return sums;
}

TEST(DatasetsGenerators, SbmStructureSeedDrawsAnotherGraphOfTheSameClassCentroids) {
  // The graph an inductive model is applied to: other members, edges, noise and split, the
  // class centroids of the seed. structure-seed = the seed is the graph of the seed itself.
  const Dataset base = load(kSbm, 2);
  const Dataset other = load(std::string(kSbm) + ",structure-seed=5", 2);
  const Dataset same = load(std::string(kSbm) + ",structure-seed=2", 2);

  EXPECT_THAT(other.name, HasSubstr(",structure-seed=5"));
  EXPECT_NE(other.labels, base.labels);
  EXPECT_NE(other.train_idx, base.train_idx);
  const std::vector<double> a = class_means(base), b = class_means(other);
  for (std::size_t k = 0; k < a.size(); ++k)
    EXPECT_NEAR(a[k], b[k], 0.15) << "class mean " << k; // 750 members of noise 1 each
  EXPECT_EQ(same.labels, base.labels);
  EXPECT_EQ(same.train_idx, base.train_idx);
  expect_canonical_adjacency(other);
}

TEST(DatasetsGenerators, UnknownGeneratorKeyThrowsInvalidArgumentListingValidKeys) {
  EXPECT_THAT([] { load("rmat:scale=8,degree=4"); },
              ThrowsMessage<InvalidArgument>(AllOf(
                  HasSubstr("'degree'"), HasSubstr("scale, edge-factor, features, classes"))));
}

TEST(DatasetsGenerators, MalformedGeneratorValueThrowsInvalidArgumentNamingKey) {
  EXPECT_THAT([] { load("sbm:nodes=ten"); },
              ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("'nodes'"), HasSubstr("'ten'"))));
  EXPECT_THAT([] { load("sbm:p-in=1.5"); },
              ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("'p-in'"), HasSubstr("[0, 1]"))));
  EXPECT_THAT([] { load("rmat:scale"); },
              ThrowsMessage<InvalidArgument>(HasSubstr("needs a value")));
}

TEST(DatasetsGenerators, GeneratorNameIsTheCanonicalSpec) {
  const Dataset ds = load("sbm:nodes=100", 0);

  EXPECT_EQ(ds.name, "sbm:nodes=100,classes=8,avg-degree=10,p-in=0.8,features=64,noise=1");
}

TEST(DatasetsGenerators, RandomSplitIsDeterministicDisjointAndSkipsUnlabelled) {
  const auto make_toy = [] {
    Dataset toy;
    toy.name = "toy";
    toy.num_nodes = 100;
    toy.labels.assign(100, 1);
    toy.labels[5] = -1;
    return toy;
  };
  Dataset ds = make_toy();
  Dataset again = make_toy();

  make_random_split(ds, 0.5, 0.25, 9);
  make_random_split(again, 0.5, 0.25, 9);

  EXPECT_EQ(ds.train_idx, again.train_idx);
  EXPECT_EQ(ds.train_idx.size(), 50u); // round(0.5 · 99)
  EXPECT_EQ(ds.val_idx.size(), 25u);
  EXPECT_EQ(ds.test_idx.size(), 24u);
  std::vector<std::int32_t> all = ds.train_idx;
  all.insert(all.end(), ds.val_idx.begin(), ds.val_idx.end());
  all.insert(all.end(), ds.test_idx.begin(), ds.test_idx.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_FALSE(std::binary_search(all.begin(), all.end(), 5));
}

TEST(DatasetsGenerators, RandomSplitWithoutLabelsThrowsInvalidArgument) {
  Dataset ds;
  ds.name = "graph-only";

  EXPECT_THAT([&] { make_random_split(ds, 0.6, 0.2, 0); },
              ThrowsMessage<InvalidArgument>(HasSubstr("graph-only")));
}

TEST(DatasetsGenerators, RowNormalizeMakesRowSumsOneAndKeepsZeroRows) {
  graph::Features dense;
  dense.dense = Dense::zeros(cpu(), 2, 3);
  (*dense.dense)(0, 0) = 1.0f;
  (*dense.dense)(0, 2) = 3.0f;
  graph::Features sparse;
  sparse.sparse = Csr(cpu(), 2, 3, 2);
  sparse.sparse->row_ptr()[1] = 2;
  sparse.sparse->row_ptr()[2] = 2;
  sparse.sparse->col()[0] = 0;
  sparse.sparse->col()[1] = 1;
  sparse.sparse->val()[0] = 1.0f;
  sparse.sparse->val()[1] = 1.0f;

  row_normalize_features(dense);
  row_normalize_features(sparse);

  EXPECT_FLOAT_EQ((*dense.dense)(0, 0), 0.25f);
  EXPECT_FLOAT_EQ((*dense.dense)(0, 2), 0.75f);
  EXPECT_EQ((*dense.dense)(1, 1), 0.0f);
  EXPECT_FLOAT_EQ(sparse.sparse->val()[0], 0.5f);
  EXPECT_FLOAT_EQ(sparse.sparse->val()[1], 0.5f);
}

} // namespace
} // namespace tessera::datasets::tests
