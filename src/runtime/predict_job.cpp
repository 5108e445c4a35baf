// run_predict_job: a checkpoint's model on this rank's graph → metrics and per-node outputs.
#include "tessera/runtime/predict_job.hpp"

#include "feature_range.hpp"
#include "job_graph.hpp"
#include "job_model.hpp"
#include "link_split.hpp"
#include "node_outputs.hpp"
#include "tessera/comm/failure.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/datasets/numpy_files.hpp"
#include "tessera/gnn/link_prediction.hpp"
#include "tessera/gnn/metrics.hpp"
#include "tessera/gnn/models.hpp"
#include "tessera/runtime/checkpoint.hpp"

#include <cmath>
#include <exception>
#include <fmt/core.h>
#include <fmt/ranges.h>

namespace tessera::runtime {

namespace {

/// "GCN 1433-16-7".
std::string model_text(const CheckpointRun& run) {
  return fmt::format("{} {}", run.model_name, fmt::join(run.layer_sizes, "-"));
}

/// The training job whose data and model steps (get_job_graph, build_job_model) this inference
/// run takes: `job`'s graph and machine, the checkpoint's model.
TrainJob training_job_of(const PredictJob& job, const Checkpoint& checkpoint) {
  const CheckpointRun& run = checkpoint.run;
  TrainJob t;
  t.dataset = job.dataset.empty() && job.partition_dir.empty() ? run.dataset : job.dataset;
  t.load = job.load;
  t.load.seed = job.data_seed.value_or(run.seed);
  t.split_seed = job.split_seed; // unset: the checkpoint's seed (train.seed), as training drew it
  t.normalize_features = job.normalize_features ? job.normalize_features : run.row_normalized;
  t.threads = job.threads;
  t.device = job.device;
  t.comm = job.comm;
  t.partition_dir = job.partition_dir;
  t.partition = job.partition;
  t.offload = job.offload;
  t.peer_timeout = job.peer_timeout;
  t.resume_dir = job.checkpoint_dir; // the data's checksum is compared with the checkpoint's
  t.shape.layer_sizes = run.layer_sizes;
  t.model = run.model;
  t.model_name = run.model_name;
  t.train.seed = run.seed;
  t.train.epochs = 0;
  t.train.metric = job.metric;
  t.outputs = job.outputs;
  if (run.task == "link") { // the model encodes nodes: its output is their embedding
    t.task = Task::Link;
    t.link.embedding_width = run.layer_sizes.back();
    t.outputs.output_is_embedding = true;
    t.outputs.predictions.clear(); // the pairs' probabilities, written here
    t.link.split_in = job.link_split_in;
    if (run.decoder == "mlp") {
      t.link.decoder = "mlp";
      t.link.decoder_hidden = run.decoder_hidden;
      t.link.decoder_layers = run.decoder_layers;
    }
  }
  if (job.model_builder) {
    t.model_builder = job.model_builder;
  } else if (run.model_name != gnn::display_name(gnn::ModelKind::Gcn)) {
    // The GCN is the job's default model (an empty builder, as tessera-train builds it).
    const std::optional<gnn::ModelBuilder> builder = gnn::builder_named(run.model_name);
    if (!builder) {
      throw InvalidArgument(fmt::format(
          "checkpoint {} holds model '{}', which is not one of the built-in models (GCN, "
          "GraphSAGE, GIN, GAT, MLP, and each of residual blocks): predict with the program that "
          "built it (runtime::PredictJob::model_builder)",
          job.checkpoint_dir, run.model_name));
    }
    t.model_builder = *builder;
  }
  return t;
}

/// Refuses a graph the checkpoint's model cannot read, naming what differs.
void check_graph_fits(const PredictJob& job, const CheckpointRun& run, const JobGraph& g) {
  const std::int64_t features = g.features.cols();
  if (features != run.features) {
    throw InvalidArgument(fmt::format(
        "checkpoint {} ({}, trained on '{}') reads {} input features per node; dataset '{}' has "
        "{}{}",
        job.checkpoint_dir, model_text(run), run.dataset, run.features, g.dataset, features,
        g.feature_source.empty() ? "" : " (" + g.feature_source + ")"));
  }
  if (run.task == "node" && g.tile.num_classes != run.classes) {
    throw InvalidArgument(
        fmt::format("checkpoint {} ({}, trained on '{}') predicts {} classes; dataset '{}' has {}",
                    job.checkpoint_dir, model_text(run), run.dataset, run.classes, g.dataset,
                    g.tile.num_classes));
  }
}

/// Refuses outputs and pairs the checkpoint's task has no use for, naming the checkpoint.
void check_task_outputs(const PredictJob& job, const CheckpointRun& run) {
  if (run.task == "link" && !job.outputs.predictions.empty() && job.pairs.empty()) {
    throw InvalidArgument(fmt::format(
        "checkpoint {} was trained for link prediction: --predictions writes the probabilities "
        "of the node pairs --pairs FILE.npz names (give it); --embeddings writes the nodes' "
        "embeddings",
        job.checkpoint_dir));
  }
  if (run.task != "link" && !job.pairs.empty()) {
    throw InvalidArgument(fmt::format("--pairs scores node pairs with a link-prediction model; "
                                      "checkpoint {} ({}) was trained to classify nodes",
                                      job.checkpoint_dir, model_text(run)));
  }
  if (run.task != "link" && !job.link_split_in.empty()) {
    throw InvalidArgument(fmt::format("--link-split-in gives a link-prediction model its "
                                      "message-passing graph; checkpoint {} ({}) was trained to "
                                      "classify nodes",
                                      job.checkpoint_dir, model_text(run)));
  }
  if (!job.pairs.empty() && job.outputs.predictions.empty()) {
    throw InvalidArgument("--pairs " + job.pairs +
                          " names pairs to score: give --predictions "
                          "FILE.npy or FILE.npz to write their probabilities to");
  }
}

/// The pairs of `path` (an .npz with `pairs`, int [2, E]). Throws FormatError naming the file for
/// a missing array or another shape.
gnn::NodePairs read_pairs(const std::string& path) {
  if (!datasets::is_npz_path(path)) {
    throw InvalidArgument("--pairs " + path +
                          ": expects an .npz file holding the array 'pairs' "
                          "(numpy: np.savez(path, pairs=np.array([src, dst])))");
  }
  const datasets::IntegerArray array = datasets::read_npz_integers(path, "pairs");
  if (array.shape.size() != 2 || array.shape[0] != 2) {
    throw FormatError(fmt::format("{}: array 'pairs' has shape ({}), expected (2, E): sources, "
                                  "then destinations",
                                  path, fmt::join(array.shape, ", ")));
  }
  const auto count = static_cast<std::ptrdiff_t>(array.shape[1]);
  gnn::NodePairs pairs;
  pairs.src.assign(array.values.begin(), array.values.begin() + count);
  pairs.dst.assign(array.values.begin() + count, array.values.end());
  return pairs;
}

/// Writes the pairs' scores to `path` as PredictJob::pairs describes (rank 0).
void write_pair_predictions(const std::string& path, const gnn::NodePairs& pairs,
                            const std::vector<double>& scores) {
  std::vector<float> score(scores.begin(), scores.end()), probability(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i)
    probability[i] = static_cast<float>(1.0 / (1.0 + std::exp(-scores[i])));
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(scores.size())};
  if (datasets::is_npy_path(path)) {
    datasets::write_npy(path, {"probability", shape, std::span<const float>(probability)});
    return;
  }
  const std::vector<std::int64_t> src(pairs.src.begin(), pairs.src.end());
  const std::vector<std::int64_t> dst(pairs.dst.begin(), pairs.dst.end());
  const datasets::NumpyArray arrays[] = {
      {"src", shape, std::span<const std::int64_t>(src)},
      {"dst", shape, std::span<const std::int64_t>(dst)},
      {"score", shape, std::span<const float>(score)},
      {"probability", shape, std::span<const float>(probability)}};
  datasets::write_npz(path, arrays);
}

} // namespace

PredictSummary run_predict_job(const PredictJob& job,
                               const std::function<void(const std::string&)>& log) {
  const Stopwatch clock;
  const std::shared_ptr<comm::Communicator> comm =
      job.comm != nullptr ? job.comm : comm::make_self_communicator();
  const Log say = [&](const std::string& line) {
    if (log && comm->rank() == 0) log(line);
  };
  if (job.checkpoint_dir.empty()) throw InvalidArgument("no checkpoint folder to predict with");
  comm->peer_watch().set_limit(job.peer_timeout);
  comm->peer_watch().set_step("reading the checkpoint");
  // Every rank reads the checkpoint (as every rank reads its part of a store); a failure on
  // any rank fails every rank.
  std::optional<Checkpoint> checkpoint;
  std::optional<TrainJob> t;
  gnn::NodePairs pairs; // every rank reads them: each scores those whose source it owns
  std::exception_ptr failure;
  try {
    check_node_outputs(job.outputs, comm->rank());
    checkpoint = read_checkpoint(job.checkpoint_dir);
    check_task_outputs(job, checkpoint->run);
    t = training_job_of(job, *checkpoint);
    t->comm = comm;
    if (!job.pairs.empty()) pairs = read_pairs(job.pairs);
  } catch (...) {
    failure = std::current_exception();
  }
  comm::share_first_failure(*comm, failure, "could not read the checkpoint");
  const CheckpointRun& run = checkpoint->run;
  say(fmt::format("checkpoint {}: {} trained on '{}' for {} epochs", job.checkpoint_dir,
                  model_text(run), run.dataset, checkpoint->state.epoch));

  const BackendPtr host = make_cpu_backend(job.threads);
  const BackendPtr backend = select_backend(job.device, comm->local_rank(), job.threads);
  say(comm->size() == 1
          ? "backend: " + backend->describe()
          : fmt::format("backend of rank 0: {}; {}", backend->describe(), comm->describe()));
  Balancing balancing;
  balancing.backend = backend;
  comm->peer_watch().set_step("loading and cutting the graph");
  JobGraph graph = get_job_graph(*t, comm, host, say, balancing);
  check_graph_fits(job, run, graph);
  if (job.normalize_features || !run.row_normalized) {
    say(describe_normalization(graph.dataset, t->normalize_features, graph.recipe_row_normalize));
  } else {
    say(fmt::format("features: {}, as the training run did (--normalize-features overrides it)",
                    *run.row_normalized ? "row-normalized" : "not row-normalized"));
  }
  if (!t->link.split_in.empty()) split_job_edges(*t, comm, graph, host, say);
  comm->peer_watch().set_step("building the model");
  JobModel model = build_job_model(*t, comm, backend, graph, say);
  check_embedding_layer(job.outputs, model);
  // A link model's pair decoder (nullptr: the dot product); its weights follow the encoder's.
  const std::unique_ptr<gnn::MlpDecoder> decoder =
      run.task == "link" ? make_link_decoder(t->link, backend, run.seed) : nullptr;
  try {
    gnn::load_weights(link_model_parameters(model.model, decoder.get()),
                      checkpoint->state.parameters);
  } catch (const DimensionMismatch& e) {
    throw InvalidArgument(fmt::format("checkpoint {} does not fit the model '{}' it names: {}",
                                      job.checkpoint_dir, model_text(run), e.what()));
  }

  comm->peer_watch().set_step("inference");
  gnn::Distribution distribution;
  distribution.comm = model.device_comm.get();
  distribution.rows = RowIds{model.row_ids.data(), 0};
  const partition::LocalGraph& tile = graph.tile;
  const gnn::NodeLabels labels{tile.labels, tile.train_idx, tile.val_idx, tile.test_idx};
  PredictSummary s;
  s.task = run.task;
  if (run.task == "node") { // a link model's output is no class: no node metrics
    s.metrics = gnn::evaluate_node_classifier(model.model_backend, model.model,
                                              input_of(model.input(graph)), labels, job.metric,
                                              &distribution);
    std::vector<std::int64_t> rows{static_cast<std::int64_t>(tile.train_idx.size()),
                                   static_cast<std::int64_t>(tile.val_idx.size()),
                                   static_cast<std::int64_t>(tile.test_idx.size())};
    comm->allreduce_sum(std::span<std::int64_t>(rows));
    s.split_rows = {rows[0], rows[1], rows[2]};
  } else if (!job.pairs.empty()) {
    std::vector<float> host_z;
    const ConstDenseView<float> z = gnn::logits_on_host(
        *model.model_backend,
        gnn::infer(model.model, input_of(model.input(graph)), 0, tile.n_owned(), &distribution),
        host_z);
    std::vector<double> scores;
    try {
      scores = gnn::score_pairs(z, pairs, tile.owned_ids, tile.num_global_nodes, comm.get(),
                                decoder.get());
    } catch (const InvalidArgument& e) { // the pairs are checked alike on every rank
      throw InvalidArgument("--pairs " + job.pairs + ": " + e.what());
    }
    std::exception_ptr write_failure;
    if (comm->rank() == 0) {
      try {
        write_pair_predictions(job.outputs.predictions, pairs, scores);
      } catch (...) {
        write_failure = std::current_exception();
      }
    }
    comm::share_first_failure(*comm, write_failure, "could not write the pairs' predictions");
    say(fmt::format("scored {} pairs; their probabilities written to {}", pairs.size(),
                    job.outputs.predictions));
    s.pairs = pairs.size();
  }
  comm->peer_watch().set_step("writing the per-node outputs");
  write_node_outputs(t->outputs, *comm, graph, model, say);
  write_model_weights(job.outputs, run, *comm, link_model_parameters(model.model, decoder.get()),
                      say);

  s.model_name = run.model_name;
  s.layer_sizes = run.layer_sizes;
  s.checkpoint_epoch = checkpoint->state.epoch;
  s.trained_on = run.dataset;
  s.dataset = graph.dataset;
  s.same_data = !run.dataset_checksum.empty() && run.dataset_checksum == graph.dataset_checksum;
  s.nodes = tile.num_global_nodes;
  s.features = run.features; // check_graph_fits: the graph's
  s.classes = tile.num_classes;
  s.row_normalized = graph.row_normalized;
  s.ranks = comm->size();
  s.seconds = clock.seconds();
  return s;
}

} // namespace tessera::runtime
