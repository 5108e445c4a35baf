// Link prediction's edge split in a job: drawn or read, shared out, and written.
#include "link_split.hpp"

#include "tessera/comm/failure.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/numpy_files.hpp"

#include <algorithm>
#include <exception>
#include <fmt/core.h>
#include <utility>

namespace tessera::runtime {

namespace {

/// The split stored in `path` (LinkOptions::split_in), whole. Throws FormatError naming the file
/// and array for an array missing, of integers not, or not of shape (2, E).
gnn::EdgeSplit read_link_split(const std::string& path) {
  gnn::EdgeSplit whole;
  const std::pair<const char*, gnn::NodePairs*> parts[] = {{"train_pos", &whole.train},
                                                           {"val_pos", &whole.val},
                                                           {"val_neg", &whole.val_negative},
                                                           {"test_pos", &whole.test},
                                                           {"test_neg", &whole.test_negative}};
  for (const auto& [name, pairs] : parts) {
    datasets::IntegerArray array = datasets::read_npz_integers(path, name);
    if (array.shape.size() != 2 || array.shape[0] != 2) {
      std::string shape;
      for (const std::int64_t d : array.shape)
        shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      throw FormatError(fmt::format("{}: array '{}' has shape ({}), expected (2, E): node-id "
                                    "pairs as --link-split-out writes them",
                                    path, name, shape));
    }
    const auto count = static_cast<std::ptrdiff_t>(array.shape[1]);
    pairs->src.assign(array.values.begin(), array.values.begin() + count);
    pairs->dst.assign(array.values.begin() + count, array.values.end());
  }
  return whole;
}

} // namespace

void write_link_split(const std::string& path, comm::Communicator& comm,
                      const gnn::EdgeSplit& split) {
  const std::pair<const char*, const gnn::NodePairs*> parts[] = {
      {"train_pos", &split.train},
      {"val_pos", &split.val},
      {"val_neg", &split.val_negative},
      {"test_pos", &split.test},
      {"test_neg", &split.test_negative}};
  std::vector<std::vector<std::int64_t>> rows;
  for (const auto& [name, pairs] : parts) {
    std::vector<GlobalId> src = comm::all_gather<GlobalId>(comm, pairs->src);
    std::vector<GlobalId> dst = comm::all_gather<GlobalId>(comm, pairs->dst);
    std::vector<std::pair<GlobalId, GlobalId>> sorted(src.size());
    for (std::size_t i = 0; i < src.size(); ++i)
      sorted[i] = {src[i], dst[i]};
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int64_t>& both = rows.emplace_back(2 * sorted.size());
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      both[i] = sorted[i].first;
      both[sorted.size() + i] = sorted[i].second;
    }
  }
  std::exception_ptr failure;
  if (comm.rank() == 0) {
    try {
      std::vector<datasets::NumpyArray> arrays;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        arrays.push_back({parts[i].first,
                          {2, static_cast<std::int64_t>(rows[i].size() / 2)},
                          std::span<const std::int64_t>(rows[i])});
      }
      datasets::write_npz(path, arrays);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  share_first_failure(comm, failure, "could not write the link split");
}

std::unique_ptr<gnn::MlpDecoder> make_link_decoder(const LinkOptions& link,
                                                   const BackendPtr& backend, std::uint64_t seed) {
  check_link_decoder(link);
  if (link.decoder == "dot") return nullptr;
  const std::int64_t hidden = link.decoder_hidden > 0 ? link.decoder_hidden : link.embedding_width;
  return std::make_unique<gnn::MlpDecoder>(backend, link.embedding_width, hidden,
                                           link.decoder_layers, seed);
}

void check_link_decoder(const LinkOptions& link) {
  if (link.decoder != "dot" && link.decoder != "mlp") {
    throw InvalidArgument("--decoder " + link.decoder + ": expects dot or mlp");
  }
  if (link.decoder_hidden < 0 || link.decoder_hidden > (1 << 20) || link.decoder_layers < 1 ||
      link.decoder_layers > 64) {
    throw InvalidArgument(fmt::format("--decoder-hidden {} and --decoder-layers {}: expects a "
                                      "width in 0..2^20 (0: the embedding width) and 1..64 layers",
                                      link.decoder_hidden, link.decoder_layers));
  }
}

std::vector<Parameter<float>*> link_model_parameters(Sequential<float>& model,
                                                     gnn::MlpDecoder* decoder) {
  std::vector<Parameter<float>*> all = model.parameters();
  if (decoder != nullptr) {
    for (Parameter<float>* p : decoder->parameters())
      all.push_back(p);
  }
  return all;
}

LinkData split_job_edges(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                         JobGraph& g, const BackendPtr& host, const Log& say) {
  partition::LocalGraph& tile = g.tile;
  LinkData link;
  link.ids = tile.owned_ids;
  link.ids.insert(link.ids.end(), tile.ghost_ids.begin(), tile.ghost_ids.end());
  const gnn::RankGraph rows{&tile.adjacency, link.ids, tile.num_global_nodes, comm.get()};
  if (job.link.split_in.empty()) {
    link.split = gnn::split_edges(rows, job.link.val_fraction, job.link.test_fraction,
                                  job.train.seed, link.training);
  } else {
    // Every rank reads the whole split (as one process would) and keeps its share.
    gnn::EdgeSplit whole;
    std::exception_ptr failure;
    try {
      whole = read_link_split(job.link.split_in);
    } catch (...) {
      failure = std::current_exception();
    }
    share_first_failure(*comm, failure, "could not read the link split");
    try {
      link.split = gnn::share_split(whole, rows, link.training);
    } catch (const InvalidArgument& e) { // thrown on every rank alike
      throw InvalidArgument("--link-split-in " + job.link.split_in + ": " + e.what());
    }
  }
  tile.adjacency = to_backend(link.training, link.training.backend());
  DenseT<double> degree(host, tile.n_owned() + tile.n_ghost(), 1);
  for (std::int64_t r = 0; r < tile.n_owned(); ++r)
    degree.data()[r] =
        static_cast<double>(tile.adjacency.row_ptr()[r + 1] - tile.adjacency.row_ptr()[r]);
  if (g.plan != nullptr && comm->size() > 1) {
    comm::HaloExchange<double>(comm, g.plan, host, comm::tags::kGhostDegrees).gather(degree.view());
  }
  for (std::int64_t r = 0; r < tile.n_owned() + tile.n_ghost(); ++r)
    tile.degree[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(degree.data()[r]);
  std::int64_t counts[] = {link.split.train.size(), link.split.val.size(), link.split.test.size()};
  comm->allreduce_sum(std::span<std::int64_t>(counts));
  say(fmt::format("link split ({}): {} training, {} validation and {} test edges, each "
                  "held-out split with as many non-edges; the held-out edges are out of the "
                  "message-passing graph",
                  job.link.split_in.empty() ? fmt::format("seed {}", job.train.seed)
                                            : "from " + job.link.split_in,
                  counts[0], counts[1], counts[2]));
  return link;
}

} // namespace tessera::runtime
