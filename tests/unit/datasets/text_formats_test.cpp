// Text formats (SNAP, METIS, LINQS, Matrix Market, MUSAE): small files and malformed ones.
#include "dataset_test_util.hpp"
#include "tessera/core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

/// Column ids of row `r`.
std::vector<LocalId> neighbours(const Dataset& ds, std::int64_t r) {
  const Csr& a = ds.adjacency;
  return {a.col() + a.row_ptr()[r], a.col() + a.row_ptr()[r + 1]};
}

std::string write_gzip(const TempDir& dir, const std::string& name, const std::string& content) {
  const std::string path = dir.file(name);
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, content.data(), static_cast<unsigned>(content.size()));
  gzclose(file);
  return path;
}

TEST(DatasetsTextFormats, SnapEdgeListKeepsIdsSkipsCommentsAndHandlesCrlf) {
  const TempDir dir;
  const std::string path = dir.write("g.txt", "# a comment\r\n0\t3\r\n3 1\r\n\r\n3 3\r\n");

  const Dataset ds = load("snap:" + path);

  EXPECT_EQ(ds.num_nodes, 4);
  EXPECT_EQ(ds.adjacency.nnz(), 4);
  EXPECT_THAT(neighbours(ds, 3), ElementsAre(0, 1));
  EXPECT_TRUE(neighbours(ds, 2).empty());
  EXPECT_EQ(ds.features.rows(), 0);
}

TEST(DatasetsTextFormats, GzipEdgeListReadsLikePlainText) {
  const TempDir dir;
  const std::string text = "0 1\n1 2\n2 0\n";
  const std::string plain = dir.write("g.txt", text);
  const std::string gz = write_gzip(dir, "g.txt.gz", text);

  const Dataset a = load("snap:" + plain);
  const Dataset b = load("snap:" + gz);

  expect_same_csr(a.adjacency, b.adjacency);
}

TEST(DatasetsTextFormats, TruncatedGzipThrowsFormatErrorNamingFile) {
  const TempDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i)
    text += std::to_string(i) + " " + std::to_string(i + 1) + "\n";
  const std::string bytes = read_bytes(write_gzip(dir, "full.txt.gz", text));
  const std::string path = dir.write("cut.txt.gz", bytes.substr(0, bytes.size() / 2));

  EXPECT_THAT([&] { load("snap:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("cut.txt.gz"), HasSubstr("gzip"))));
}

TEST(DatasetsTextFormats, EdgeListIdOutOfRangeThrowsFormatErrorNamingLine) {
  const TempDir dir;
  const std::string path = dir.write("edges.txt", "0 1\n2 -1\n");

  EXPECT_THAT([&] { load("snap:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("edges.txt:2:"), HasSubstr("-1"), HasSubstr("outside"))));
}

TEST(DatasetsTextFormats, EdgeListWordThrowsFormatErrorQuotingIt) {
  const TempDir dir;
  const std::string path = dir.write("edges.txt", "0 1\n1 two\n");

  EXPECT_THAT([&] { load("snap:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("edges.txt:2:"), HasSubstr("expected a node id, found 'two'"))));
}

TEST(DatasetsTextFormats, EdgeListWithoutEdgesThrowsFormatError) {
  const TempDir dir;
  const std::string path = dir.write("empty.txt", "# only a comment\n");

  EXPECT_THAT([&] { load("snap:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("empty.txt"), HasSubstr("no edges"))));
}

TEST(DatasetsTextFormats, MetisGraphKeepsBlankLinesAsIsolatedVertices) {
  const TempDir dir;
  const std::string path = dir.write("g.graph", "% comment\n4 2\n2\n1 4\n\n2\n");

  const Dataset ds = load("metis:" + path);

  EXPECT_EQ(ds.num_nodes, 4);
  EXPECT_EQ(ds.adjacency.nnz(), 4);
  EXPECT_THAT(neighbours(ds, 1), ElementsAre(0, 3));
  EXPECT_TRUE(neighbours(ds, 2).empty());
}

TEST(DatasetsTextFormats, MetisGraphSkipsVertexAndEdgeWeights) {
  const TempDir dir;
  const std::string path = dir.write("w.graph", "3 2 011\n5 2 9\n1 1 9 3 4\n7 2 4\n");

  const Dataset ds = load("metis:" + path);

  EXPECT_THAT(neighbours(ds, 1), ElementsAre(0, 2));
}

TEST(DatasetsTextFormats, MetisNeighbourOutOfRangeThrowsFormatErrorNamingLine) {
  const TempDir dir;
  const std::string path = dir.write("bad.graph", "2 1\n3\n1\n");

  EXPECT_THAT([&] { load("metis:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("bad.graph:2:"),
                                               HasSubstr("neighbour 3 of vertex 1"),
                                               HasSubstr("outside [1, 2]"))));
}

TEST(DatasetsTextFormats, MetisEdgeCountMismatchThrowsFormatError) {
  const TempDir dir;
  const std::string path = dir.write("count.graph", "3 2\n2\n1\n\n");

  EXPECT_THAT([&] { load("metis:" + path); },
              ThrowsMessage<FormatError>(AllOf(
                  HasSubstr("count.graph"), HasSubstr("promises 2 edges"), HasSubstr("hold 2"))));
}

TEST(DatasetsTextFormats, MetisMissingVertexLinesThrowsFormatError) {
  const TempDir dir;
  const std::string path = dir.write("short.graph", "3 1\n2\n1\n");

  EXPECT_THAT([&] { load("metis:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("short.graph"), HasSubstr("expected 3 vertex lines"))));
}

TEST(DatasetsTextFormats, LinqsMapsStringIdsAndSortedClassNames) {
  const TempDir dir;
  const std::string content =
      dir.write("toy.content", "p-a\t1\t0\tZebra\np-b\t0\t0\tAnt\np-c\t1\t1\tZebra\n");
  dir.write("toy.cites", "p-a\tp-b\np-c\tp-a\n");

  const Dataset ds = load("linqs:" + content);

  EXPECT_EQ(ds.num_nodes, 3);
  EXPECT_EQ(ds.adjacency.nnz(), 4);
  EXPECT_THAT(ds.labels, ElementsAre(1, 0, 1));
  EXPECT_EQ(ds.num_classes, 2);
  ASSERT_TRUE(ds.features.is_sparse());
  EXPECT_EQ(ds.features.cols(), 2);
  EXPECT_EQ(ds.features.sparse->nnz(), 3);
}

TEST(DatasetsTextFormats, LinqsRaggedLineThrowsFormatErrorNamingLine) {
  const TempDir dir;
  const std::string content = dir.write("toy.content", "a\t1\t0\tX\nb\t0\tY\n");
  dir.write("toy.cites", "a\tb\n");

  EXPECT_THAT(
      [&] { load("linqs:" + content); },
      ThrowsMessage<FormatError>(AllOf(HasSubstr("toy.content:2:"), HasSubstr("expected 4 fields"),
                                       HasSubstr("found 3"))));
}

TEST(DatasetsTextFormats, LinqsUnknownCitedIdThrowsFormatErrorNamingCitesLine) {
  const TempDir dir;
  const std::string content = dir.write("toy.content", "a\t1\tX\nb\t0\tY\n");
  dir.write("toy.cites", "a\tb\nb\tghost\n");

  EXPECT_THAT([&] { load("linqs:" + content); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("toy.cites:2:"), HasSubstr("'ghost'"),
                                               HasSubstr("toy.content"))));
}

TEST(DatasetsTextFormats, MatrixMarketSymmetricPatternLoadsAsGraph) {
  const TempDir dir;
  const std::string path = dir.write(
      "m.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n% c\n3 3 2\n2 1\n3 3\n");

  const Dataset ds = load("mtx:" + path);

  EXPECT_EQ(ds.num_nodes, 3);
  EXPECT_EQ(ds.adjacency.nnz(), 2);
  EXPECT_EQ(ds.name, "m");
}

TEST(DatasetsTextFormats, MatrixMarketIndexOutOfRangeThrowsFormatErrorNamingLine) {
  const TempDir dir;
  const std::string path = dir.write(
      "m.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 0.5\n4 1 1.0\n");

  EXPECT_THAT([&] { load("mtx:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("m.mtx:4:"), HasSubstr("index 4"))));
}

TEST(DatasetsTextFormats, MatrixMarketNonSquareThrowsFormatError) {
  const TempDir dir;
  const std::string path =
      dir.write("r.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 2\n");

  EXPECT_THAT([&] { load("mtx:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("r.mtx:2:"), HasSubstr("square"))));
}

TEST(DatasetsTextFormats, MusaeReadsQuotedNamesAndFeatureLists) {
  const TempDir dir;
  const std::string edges = dir.write("toy_edges.csv", "id_1,id_2\n0,1\n1,2\n2,2\n");
  dir.write("toy_target.csv", "id,facebook_id,page_name,page_type\n0,11,\"Office, Inc\",company\n"
                              "1,12,Senator,politician\n2,13,Show,tvshow\n");
  dir.write("toy.json", R"({"0": [4, 1], "2": [0], "1": []})");

  const Dataset ds = load("musae:" + edges);

  EXPECT_EQ(ds.num_nodes, 3);
  EXPECT_EQ(ds.adjacency.nnz(), 4);
  EXPECT_THAT(ds.labels, ElementsAre(0, 1, 2));
  EXPECT_EQ(ds.features.cols(), 5);
  EXPECT_EQ(ds.features.sparse->nnz(), 3);
  EXPECT_EQ(ds.name, "toy");
}

TEST(DatasetsTextFormats, MusaeEdgeToUnknownNodeThrowsFormatErrorNamingLine) {
  const TempDir dir;
  const std::string edges = dir.write("toy_edges.csv", "id_1,id_2\n0,1\n1,5\n");
  dir.write("toy_target.csv", "id,name,type\n0,a,x\n1,b,y\n");
  dir.write("toy.json", R"({"0": [0], "1": [1]})");

  EXPECT_THAT([&] { load("musae:" + edges); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("toy_edges.csv:3:"), HasSubstr("node id 5 is outside [0, 2)"))));
}

TEST(DatasetsTextFormats, MissingFileThrowsIoErrorNamingPath) {
  EXPECT_THAT([] { load("metis:/nonexistent/mesh.graph"); },
              ThrowsMessage<IoError>(HasSubstr("/nonexistent/mesh.graph")));
}

TEST(DatasetsTextFormats, UnknownFormatThrowsInvalidArgumentListingFormats) {
  EXPECT_THAT([] { load("csv:/tmp/x.csv"); },
              ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("'csv'"), HasSubstr("snap, metis"))));
}

} // namespace
} // namespace tessera::datasets::tests
