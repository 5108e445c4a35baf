// train_main: tessera-train's main for any model (flags, MPI start, progress, report, errors).
// The only place below the apps that parses flags or prints.
#include "tessera/runtime/train_main.hpp"

#include "program_main.hpp"
#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/gnn/models.hpp"
#include "tessera/io/files.hpp"
#include "tessera/runtime/cli_options.hpp"
#include "tessera/runtime/job_paths.hpp"
#include "tessera/runtime/job_start.hpp"
#include "tessera/runtime/offload_options.hpp"
#include "tessera/runtime/progress_display.hpp"
#include "tessera/runtime/train_job.hpp"

#include <CLI/CLI.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/core.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unistd.h>
#include <utility>
#include <vector>

namespace tessera::runtime {

namespace {

/// --fanouts "25,10" → {25, 10}: integers >= 1, or -1 (all); InvalidArgument naming the item.
std::vector<int> parse_fanouts(const std::string& text) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value == 0 || value < -1 || value > 1000000000) {
      throw InvalidArgument(fmt::format("--fanouts '{}': item {} ('{}') is not a neighbour count: "
                                        "expected comma-separated counts >= 1, or -1 for all "
                                        "neighbours, such as 25,10",
                                        text, out.size() + 1, item));
    }
    out.push_back(static_cast<int>(value));
    at = comma + 1;
  }
  return out;
}

/// tessera-train's flags: the shared ones and the GCN's and the distributed job's own.
struct Options : TrainingFlags {
  Options()
      : TrainingFlags("sbm:nodes=20000,classes=8,avg-degree=10,p-in=0.7,features=64,noise=2") {}
  bool decay_all_layers = false;
  std::string model = "gcn";
  std::int64_t heads = 8;
  std::int64_t output_heads = 1;
  std::optional<double> attention_dropout; // not given: --dropout
  bool residual = false;
  std::string norm = "layer";
  std::int64_t feed_forward = 1;
  std::string init = "glorot";
  bool one_logit = false;
  std::string feature_layout = "auto";
  std::string order = "auto";
  std::string activation_dtype = "fp32";
  std::string partition_dir;
  std::string partition_method = "metis";
  std::string balance = "none";
  std::string rank_speeds;
  double rebalance_threshold = 1.1;
  std::vector<std::string> simulate_rank_speed;
  bool no_feature_cache = false;
  std::string simulate_link;
  std::string halo_precision = "fp32";
  int staleness = 0;
  double staleness_smoothing = -1.0; // not given: the library's (0.95)
  double skip_threshold = -1.0;      // unset: no skipping
  int skip_max_age = 0;              // unset: ExchangeOptions' default
  std::string schedule = "fixed";
  std::string allow_inexact;
  std::string inject_failure;
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  std::string resume;
  bool force = false;
  OffloadFlags offload;
  NodeOutputFlags outputs;
  std::string task = "node";
  std::string link_split = "0.05,0.1";
  std::int64_t embedding_width = 16;
  std::string hits_k = "20,50,100";
  std::string link_split_out;
  std::string link_split_in;
  std::string mode = "full";
  std::string fanouts = "25,10";
  std::int64_t batch_size = 512;
  std::string feature_cache = "auto";
  int prefetch_batches = 2;
  std::string decoder = "dot";
  std::int64_t decoder_hidden = 0;
  int decoder_layers = 2;
};

/// The signal that asked training to stop (0: none), set by the handler below.
volatile std::sig_atomic_t stop_signal = 0;
/// Set once the data and the model are ready and the first epoch starts: before that a stop
/// signal has nothing to save and ends the process at once.
volatile std::sig_atomic_t training_started = 0;
/// What the handler writes when it ends the process before training: made before it may run (a
/// handler may only write(2) bytes it already has). One per signal it catches.
char early_stop_message[3][160];
constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGUSR1};

extern "C" void on_stop_signal(int signal) {
  // Any later stop signal gets its default action: a second one always ends the process.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  for (const int other : kStopSignals)
    sigaction(other, &fallback, nullptr);
  if (training_started == 0) {
    // Loading, cutting or waiting on a read: nothing to checkpoint yet, and a blocked read would
    // never reach an epoch's end. Say so and die of the signal, as without the handler.
    for (int i = 0; i < 3; ++i) {
      if (kStopSignals[i] != signal) continue;
      const ssize_t ignored =
          ::write(STDERR_FILENO, early_stop_message[i], std::strlen(early_stop_message[i]));
      (void)ignored;
    }
    ::raise(signal);
    return;
  }
  stop_signal = signal;
}

/// SIGINT, SIGTERM and SIGUSR1: before training starts they end the process at once (with a
/// line saying so); during training the first asks to stop after the current epoch (and
/// checkpoint), and any second one ends the process at once. Open MPI's mpirun answers
/// SIGINT/SIGTERM by killing the ranks (SIGTERM, then SIGKILL one second later: MCA
/// odls_base_sigkill_timeout) but forwards SIGUSR1 to every rank, so under mpirun the graceful
/// stop is SIGUSR1 to mpirun, or SIGTERM to every rank's process.
void catch_stop_signals(int rank) {
  const char* names[3] = {"SIGINT", "SIGTERM", "SIGUSR1"};
  for (int i = 0; i < 3; ++i) {
    std::snprintf(early_stop_message[i], sizeof early_stop_message[i],
                  "[rank %d] error: stopped by %s before training started (nothing to save)\n",
                  rank, names[i]);
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (const int signal : kStopSignals)
    sigaction(signal, &action, nullptr);
}

/// The flags every program has, and the GCN's own when `gcn`.
void add_flags(CLI::App& app, Options& o, bool gcn) {
  start_everyday_flags(app);
  add_training_flags(app, o,
                     {"name under --data-dir (cora, minesweeper, facebook, email-eu-core, ...), "
                      "FORMAT:PATH (npz:, linqs:, snap:, metis:, musae:, mtx:) or a generator "
                      "(sbm:nodes=N,..., rmat:scale=S,...)",
                      gcn ? "layer sizes, e.g. 1433-16-7 (overrides --hidden/--num-layers)" : "",
                      "graph layer"});
  if (gcn) {
    app.add_option("--model", o.model,
                   "the graph model: gcn (Kipf & Welling), sage (GraphSAGE, mean aggregator), "
                   "gin (GIN, learnable epsilon), gat (GAT: --heads, --attention-dropout) or mlp "
                   "(no graph: the node features alone; with --residual the ResNet baseline)")
        ->capture_default_str()
        ->check(CLI::IsMember({"gcn", "sage", "gin", "gat", "mlp"}));
    add_integer_option(app, "--heads", o.heads, 1, 4096,
                       "GAT: attention heads of every hidden layer, concatenated (a hidden layer "
                       "gives heads x --hidden features)")
        ->capture_default_str();
    add_integer_option(app, "--output-heads", o.output_heads, 1, 4096,
                       "GAT: attention heads of the output layer, averaged")
        ->capture_default_str();
    add_number_option(app, "--attention-dropout", o.attention_dropout, 0, false, 0.999,
                      "GAT: dropout of the attention coefficients while training (default: "
                      "--dropout)");
    app.add_flag(
        "--residual", o.residual,
        "build the model of residual blocks (Platonov et al.): an input Linear, then per "
        "graph layer x + FF(layer(norm(x))) with a GELU feed-forward part, then a norm and "
        "an output Linear; --hidden is every block's width, --num-layers the number of blocks "
        "(with --layers: one block per hidden size)");
    app.add_option("--norm", o.norm,
                   "with --residual: the normalization of each block's input and of the output: "
                   "none, layer (LayerNorm) or batch (BatchNorm, statistics over every rank)")
        ->capture_default_str()
        ->check(CLI::IsMember({"none", "layer", "batch"}));
    add_integer_option(app, "--feed-forward", o.feed_forward, 1, 64,
                       "with --residual: the width of each block's feed-forward part, in multiples "
                       "of --hidden")
        ->capture_default_str();
    app.add_option(
           "--init", o.init,
           "with --residual: how the weights start: glorot (Glorot-uniform weights, zero "
           "biases) or fan-in (PyTorch's nn.Linear: weights and biases U(+-1/sqrt(fan-in)), "
           "the start of the heterophilous benchmark's code)")
        ->capture_default_str()
        ->check(CLI::IsMember({"glorot", "fan-in"}));
    app.add_flag("--one-logit", o.one_logit,
                 "with --residual on two classes: one output logit z trained with binary "
                 "cross-entropy (the logits [0, z]), as the heterophilous benchmark's code");
    app.add_flag("--decay-all-layers", o.decay_all_layers,
                 "GCN: apply weight decay to every layer (default: first layer only, as Kipf & "
                 "Welling; the other models decay every layer)");
  }
  app.add_option("--feature-layout", o.feature_layout,
                 "how input features are stored for training: auto (dense from 12 % nonzeros, "
                 "where dense trains faster; sparse below), sparse or dense")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "sparse", "dense"}));
  if (gcn) {
    app.add_option("--order", o.order, "GCN product order: auto, aggregate-first, transform-first")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "aggregate-first", "transform-first"}));
    app.add_option("--activation-dtype", o.activation_dtype,
                   "storage of what the GCN layers aggregate: fp32, or bf16 (half the bytes "
                   "gathered, summed in fp32; gradients stay fp32; not with --device-memory)")
        ->capture_default_str()
        ->check(CLI::IsMember({"fp32", "bf16"}));
  }
  add_path_option(app, "--partition-dir", o.partition_dir,
                  "partition store (tessera-partition --out) with one part per rank; each rank "
                  "loads only its part (default: rank 0 partitions the graph in memory)");
  app.add_option(
         "--partition-method", o.partition_method,
         "how the graph is cut: metis, metis-recursive, block or random by rank 0 holding the "
         "whole graph; hypergraph (Zoltan PHG) and ptscotch (PT-Scotch): every rank reads only "
         "its share of the rows and the ranks cut them together, so no rank holds the whole "
         "graph (needs data with a split, e.g. a native dataset; hypergraph in one process cuts "
         "the whole graph; parmetis is ptscotch's old name)")
      ->capture_default_str()
      ->check(CLI::IsMember(
          {"metis", "metis-recursive", "hypergraph", "block", "random", "ptscotch", "parmetis"}));
  app.add_option("--balance", o.balance,
                 "in-memory partitioning for ranks of different speeds: none (equal parts), "
                 "given (part r's share follows --rank-speeds) or measured (the speeds each "
                 "rank's cost model measures at start); balanced jobs also rebalance while "
                 "training (--rebalance-threshold)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "given", "measured"}));
  app.add_option("--rank-speeds", o.rank_speeds,
                 "with --balance given: each rank's relative speed, e.g. 1,1,0.5,0.25");
  add_number_option(app, "--rebalance-threshold", o.rebalance_threshold, 0, false, 1e9,
                    "with --balance: re-cut the graph at an epoch boundary when max / mean of "
                    "the ranks' measured compute per epoch exceeds this, for speeds fitted to the "
                    "measured times (at most 3 times; exact: the losses do not change); 0: never")
      ->capture_default_str();
  app.add_flag("--no-feature-cache", o.no_feature_cache,
               "fetch ghost input features every epoch instead of once (to measure the cache)");
  add_path_option(
      app, "--checkpoint-dir", o.checkpoint_dir,
      "write checkpoints (weights, Adam state, epoch, best validation) to this folder "
      "after every --checkpoint-every epochs, the last epoch, and a stop signal (SIGINT, "
      "SIGTERM; under mpirun: SIGUSR1 to mpirun, or SIGTERM to every rank)");
  add_integer_option(app, "--checkpoint-every", o.checkpoint_every, 0, 100000000,
                     "epochs between checkpoints (0: after the last epoch and on a signal only)")
      ->capture_default_str();
  add_path_option(app, "--resume", o.resume,
                  "continue from the latest checkpoint in this folder (same data and model; made "
                  "at any rank count); --epochs counts from the start of the original run");
  app.add_flag("--force", o.force, "replace an existing checkpoint in --checkpoint-dir");
  add_node_output_flags(app, o.outputs);
  if (gcn) {
    app.add_option("--mode", o.mode,
                   "full (every epoch one step over the whole graph) or sampled (a step per "
                   "mini-batch of --batch-size training nodes, each layer over --fanouts sampled "
                   "neighbours; GraphSAGE, on 1..P ranks)")
        ->capture_default_str()
        ->check(CLI::IsMember({"full", "sampled"}));
    app.add_option("--fanouts", o.fanouts,
                   "with --mode sampled: neighbours sampled per node at each hop from the seeds, "
                   "one count per graph layer (-1: all), e.g. 25,10")
        ->capture_default_str();
    add_integer_option(app, "--batch-size", o.batch_size, 1, std::int64_t{1} << 40,
                       "with --mode sampled: training nodes per step (per rank: over ranks each "
                       "rank's share of ranks x this, by the training nodes it owns)")
        ->capture_default_str();
    app.add_option("--feature-cache", o.feature_cache,
                   "with --mode sampled on several ranks: bytes of each rank's cache of the input "
                   "features of the remote nodes most often next to its rows, fetched once (0: "
                   "none; auto: as many bytes as the rank's own input rows take)")
        ->capture_default_str();
    add_integer_option(app, "--prefetch-batches", o.prefetch_batches, 0, 64,
                       "with --mode sampled: batches sampled ahead on a thread of their own while "
                       "the steps train (0: each step samples its batch; over ranks the thread "
                       "exchanges on a communicator of its own)")
        ->capture_default_str();
    app.add_option("--task", o.task,
                   "node (classify nodes) or link (predict held-out edges: the model encodes "
                   "nodes, a pair's score is the dot product of its ends)")
        ->capture_default_str()
        ->check(CLI::IsMember({"node", "link"}));
    app.add_option("--link-split", o.link_split,
                   "with --task link: the fractions of the edges held out for validation and "
                   "test, drawn by --seed (e.g. 0.05,0.1)")
        ->capture_default_str();
    add_integer_option(app, "--embedding-width", o.embedding_width, 1, std::int64_t{1} << 20,
                       "with --task link: the width of the encoder's output")
        ->capture_default_str();
    app.add_option("--hits-k", o.hits_k, "with --task link: the Ks of the Hits@K reported")
        ->capture_default_str();
    add_path_option(app, "--link-split-out", o.link_split_out,
                    "with --task link: record the split in FILE.npz (train_pos, val_pos, val_neg, "
                    "test_pos, test_neg: int64 [2, E] node-id pairs)");
    app.add_option("--decoder", o.decoder,
                   "with --task link: a pair's score — dot (the embeddings' dot product) or mlp "
                   "(their elementwise product through an MLP trained with the encoder)")
        ->capture_default_str()
        ->check(CLI::IsMember({"dot", "mlp"}));
    add_integer_option(app, "--decoder-hidden", o.decoder_hidden, 0, std::int64_t{1} << 20,
                       "with --decoder mlp: its hidden width (0: the embedding width)")
        ->capture_default_str();
    add_integer_option(app, "--decoder-layers", o.decoder_layers, 1, 64,
                       "with --decoder mlp: its Linear layers (ReLU between)")
        ->capture_default_str();
    add_path_option(app, "--link-split-in", o.link_split_in,
                    "with --task link: train on the split stored in FILE.npz (as --link-split-out "
                    "writes it; the message-passing graph is its train_pos edges) instead of "
                    "drawing one");
  }
  add_offload_flags(app, o.offload,
                    "features, matrices, activations, weights, gradients and Adam state");
  app.add_option("--halo-precision", o.halo_precision,
                 "fp32 (exact), or compressed halo messages: bf16 (half the bytes) or int8 (a "
                 "quarter: per-row scale, stochastic rounding)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
  add_integer_option(
      app, "--staleness", o.staleness, 0, 1,
      "0: exact halos; 1: PipeGCN's pipeline: a training step uses the boundary rows "
      "and gradients of the epoch before, so this epoch's travel while the next "
      "computes (inexact; the first epoch and every evaluation stay exact; a no-op on "
      "one process)")
      ->capture_default_str();
  add_number_option(app, "--staleness-smoothing", o.staleness_smoothing, 0, false, 0.999999,
                    "with --staleness 1: the stale rows and gradients used are a running average, "
                    "s·before + (1 − s)·received (PipeGCN-GF; default 0.95, PipeGCN's); 0: as "
                    "received");
  add_number_option(
      app, "--halo-skip-threshold", o.skip_threshold, 0, false, 1e30,
      "Sancus: an owner re-sends a boundary row (and a rank a boundary gradient row) "
      "only when it changed by more than this fraction (L2, relative) since it was "
      "last sent; receivers reuse the row they hold (inexact above 0; evaluation stays "
      "exact)");
  add_integer_option(app, "--halo-skip-max-age", o.skip_max_age, 1, 1000000,
                     "with --halo-skip-threshold: a row is re-sent at least every this many epochs "
                     "(default 4)");
  app.add_option("--schedule", o.schedule,
                 "fixed: every layer exchanges halos as the flags above say; auto: the cost "
                 "model (rates measured at start on each rank's matrix and links) gives each "
                 "layer the exchange it predicts fastest, among exact fp32, the flags' choice "
                 "and what --allow-inexact names")
      ->capture_default_str();
  app.add_option("--allow-inexact", o.allow_inexact,
                 "with --schedule auto: inexact exchanges it may pick, e.g. stale,bf16 (any of "
                 "stale, skip, bf16, int8; none by default: exact only)");
  app.add_option("--simulate-link", o.simulate_link,
                 "simulation: GBPS[:LATENCY_US] holds the halo exchanges and gradient sums back "
                 "as a link of that many Gb/s (and µs per message) would, e.g. 10:5; for "
                 "measuring communication on ranks that share memory");
  app.add_option("--simulate-rank-speed", o.simulate_rank_speed,
                 "simulation: R:FACTOR makes rank R's training compute take 1/FACTOR as long as "
                 "it measured (FACTOR in (0, 1]; repeat the flag for several ranks): a slower "
                 "device on a machine of equal cores");
  app.add_option("--inject-failure", o.inject_failure,
                 "testing: RANK:EPOCH makes that rank throw after that epoch");
  if (gcn) {
    group_flags(app, kTuningFlags,
                {"--output-heads", "--attention-dropout", "--norm", "--feed-forward", "--init",
                 "--one-logit", "--order", "--activation-dtype"});
  }
  group_flags(app, kTuningFlags,
              {"--feature-layout", "--balance", "--rank-speeds", "--rebalance-threshold",
               "--halo-precision", "--staleness", "--staleness-smoothing", "--halo-skip-threshold",
               "--halo-skip-max-age", "--schedule", "--allow-inexact"});
  group_flags(
      app, kTestingFlags,
      {"--no-feature-cache", "--simulate-link", "--simulate-rank-speed", "--inject-failure"});
}

/// The flags' defaults for `program`: its model settings.
Options defaults_of(const TrainProgram& program) {
  Options o;
  o.dropout = program.model.dropout;
  o.order = to_string(program.model.order);
  o.activation_dtype = to_string(program.model.activation_dtype);
  o.decay_all_layers = !program.model.decay_first_layer_only;
  return o;
}

TrainJob make_job(const Options& o, const TrainProgram& program) {
  TrainJob job;
  job.dataset = o.dataset;
  job.load = o.load_options();
  job.split_seed = o.split_seed;
  job.threads = o.threads;
  job.device = parse_device_choice(o.device);
  job.normalize_features = o.normalize_choice();
  job.feature_layout = graph::parse_feature_layout(o.feature_layout);
  if (!o.layers.empty()) job.shape.layer_sizes = parse_layer_sizes(o.layers);
  job.shape.hidden = o.hidden;
  // Residual blocks take one hidden size each ({in, hidden × blocks, classes}): --num-layers
  // counts the blocks.
  job.shape.num_layers = o.residual ? o.num_layers + 1 : o.num_layers;
  job.model = program.model;
  job.model.dropout = o.dropout;
  job.model.order = parse_gcn_order(o.order);
  job.model.activation_dtype = parse_activation_dtype(o.activation_dtype);
  job.model.decay_first_layer_only = !o.decay_all_layers;
  job.model_builder = program.model_builder;
  job.model_name = program.model_name;
  if (const gnn::ModelKind kind = gnn::parse_model_kind(o.model); kind != gnn::ModelKind::Gcn) {
    job.model_builder = gnn::builder_for(kind);
    job.model_name = gnn::display_name(kind);
    job.model.decay_first_layer_only = false;
  }
  job.model.heads = o.heads;
  job.model.output_heads = o.output_heads;
  job.model.attention_dropout = static_cast<float>(o.attention_dropout.value_or(o.dropout));
  job.model.norm = gnn::parse_norm_kind(o.norm);
  job.model.feed_forward_multiplier = o.feed_forward;
  job.model.init = gnn::parse_weight_init(o.init);
  job.model.one_logit = o.one_logit;
  if (job.model.init != gnn::WeightInit::Glorot && !o.residual) {
    throw InvalidArgument(
        "--init " + o.init +
        " starts the residual blocks' layers; add --residual or leave --init out");
  }
  if (o.one_logit && !o.residual) {
    throw InvalidArgument(
        "--one-logit ends the residual blocks; add --residual or leave --one-logit out");
  }
  if (o.residual) {
    const gnn::ModelKind kind = gnn::parse_model_kind(o.model);
    job.model_builder = [kind](gnn::ModelGraph& graph, const gnn::ModelSpec& spec) {
      return gnn::build_residual(graph, spec, kind);
    };
    job.model_name = gnn::residual_name(kind);
    job.model.decay_first_layer_only = false;
  }
  job.train.epochs = o.epochs;
  job.train.eval_every = o.eval_every;
  job.train.seed = o.seed;
  job.train.metric = gnn::parse_metric(o.metric);
  job.train.adam.lr = o.lr;
  job.train.adam.weight_decay = o.weight_decay;
  job.train.adam.decoupled = o.optimizer == "adamw";
  job.partition_dir = o.partition_dir;
  job.partition.method = partition::parse_method(o.partition_method);
  job.partition.seed = o.seed;
  job.balance = partition::parse_balance(o.balance);
  if (!o.rank_speeds.empty()) job.rank_speeds = parse_part_weights(o.rank_speeds, "--rank-speeds");
  job.rebalance_threshold = o.rebalance_threshold;
  for (const std::string& text : o.simulate_rank_speed)
    job.simulation.rank_speeds.push_back(parse_rank_speed(text));
  job.cache_input_features = !o.no_feature_cache;
  if (!o.simulate_link.empty()) job.simulation.link = parse_link_model(o.simulate_link);
  if (!o.inject_failure.empty()) {
    std::tie(job.simulation.fail_rank, job.simulation.fail_epoch) = parse_failure(o.inject_failure);
  }
  job.exchange.precision = comm::parse_halo_precision(o.halo_precision);
  job.exchange.seed = o.seed;
  if (o.staleness > 0 && o.skip_threshold >= 0) {
    throw InvalidArgument("--staleness and --halo-skip-threshold choose different exchange "
                          "modes (stale, skip): give one");
  }
  if (o.staleness_smoothing >= 0 && o.staleness == 0) {
    throw InvalidArgument("--staleness-smoothing smooths stale rows: it needs --staleness 1");
  }
  if (o.skip_max_age > 0 && o.skip_threshold < 0) {
    throw InvalidArgument("--halo-skip-max-age bounds skipped rows: it needs "
                          "--halo-skip-threshold");
  }
  if (o.staleness > 0) job.exchange.mode = comm::HaloMode::Stale;
  if (o.skip_threshold >= 0) job.exchange.mode = comm::HaloMode::Skip;
  if (o.staleness_smoothing >= 0) job.exchange.smoothing = o.staleness_smoothing;
  job.exchange.skip_threshold = std::max(o.skip_threshold, 0.0);
  if (o.skip_max_age > 0) job.exchange.skip_max_age = o.skip_max_age;
  check_flags("--staleness-smoothing, --halo-skip-threshold or --halo-skip-max-age",
              [&] { job.exchange.validate(); });
  job.schedule = parse_schedule(o.schedule);
  if (!o.allow_inexact.empty() && job.schedule != runtime::Schedule::Auto) {
    throw InvalidArgument("--allow-inexact lists what --schedule auto may pick: it needs "
                          "--schedule auto");
  }
  parse_allowed_inexact(o.allow_inexact, job.allowed_modes, job.allowed_precisions);
  job.checkpoint_dir = o.checkpoint_dir;
  job.checkpoint_every = o.checkpoint_every;
  job.replace_checkpoints = o.force;
  job.resume_dir = o.resume;
  job.offload = offload_config(o.offload);
  job.outputs = o.outputs.outputs();
  job.task = parse_task(o.task);
  job.sampled.enabled = o.mode == "sampled";
  if (job.sampled.enabled) {
    job.sampled.fanouts = parse_fanouts(o.fanouts);
    job.sampled.batch_size = o.batch_size;
    if (o.feature_cache != "auto") {
      try {
        job.sampled.cache_bytes = parse_byte_size(o.feature_cache, "--feature-cache");
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(std::string(e.what()) +
                              ", or auto (as many bytes as the rank's own input rows)");
      }
    }
    job.sampled.prefetch = o.prefetch_batches;
  }
  if (job.task == Task::Link) {
    const std::vector<double> fractions =
        parse_number_list(o.link_split, "--link-split", true, "0.05,0.1");
    if (fractions.size() != 2) {
      throw InvalidArgument("--link-split " + o.link_split +
                            ": expects two fractions, validation and test, e.g. 0.05,0.1");
    }
    job.link.val_fraction = fractions[0];
    job.link.test_fraction = fractions[1];
    job.link.embedding_width = o.embedding_width;
    job.link.split_out = o.link_split_out;
    job.link.split_in = o.link_split_in;
    job.link.decoder = o.decoder;
    job.link.decoder_hidden = o.decoder_hidden;
    job.link.decoder_layers = o.decoder_layers;
    job.link.hits_k.clear();
    for (const double k : parse_number_list(o.hits_k, "--hits-k", false, "20,50,100")) {
      if (k < 1 || k != std::floor(k) || k > 1e9) {
        throw InvalidArgument("--hits-k " + o.hits_k + ": expects whole numbers >= 1");
      }
      job.link.hits_k.push_back(static_cast<int>(k));
    }
    job.train.metric = gnn::Metric::RocAuc; // the validation ROC-AUC selects the epoch
  }
  job.peer_timeout = o.peer_timeout;
  job.stop_requested = [] { return static_cast<int>(stop_signal); };
  job.training_starts = [] { training_started = 1; };
  return job;
}

/// Refuses outputs that name an input of the job (the report written over the dataset's file, a
/// checkpoint folder inside the store): before anything is read or written. Resuming into the
/// folder the checkpoint comes from is what --resume with the same --checkpoint-dir does.
void check_outputs(const TrainJob& job, const std::string& report) {
  std::vector<std::string> inputs = datasets::dataset_inputs(job.dataset, job.load);
  inputs.push_back(job.partition_dir);
  refuse_outputs_over_inputs({{"--checkpoint-dir", job.checkpoint_dir, true},
                              {"--offload-dir", job.offload.offload_dir, true}},
                             inputs);
  inputs.push_back(job.resume_dir);
  refuse_outputs_over_inputs({{"--report", report, false},
                              {"--predictions", job.outputs.predictions, false},
                              {"--export-weights", job.outputs.weights, false},
                              {"--embeddings", job.outputs.embeddings, false},
                              {"--link-split-out", job.link.split_out, false}},
                             inputs);
}

/// Refuses flags that would be ignored with the others given: a user who passes them expects
/// them to do something.
void check_flag_combinations(const CLI::App& app, const Options& o) {
  refuse_flags_ignored_with_store(app, o.partition_dir);
  if (app.count("--rebalance-threshold") > 0 && o.balance == "none") {
    throw InvalidArgument("--rebalance-threshold rebalances a balanced cut: it needs --balance "
                          "given or measured");
  }
  if (app.count("--checkpoint-every") > 0 && o.checkpoint_dir.empty()) {
    throw InvalidArgument("--checkpoint-every needs --checkpoint-dir (where to write them)");
  }
  if (o.activation_dtype == "bf16" && uses_chunks(offload_config(o.offload))) {
    throw InvalidArgument("bf16 activations (--activation-dtype bf16) are not supported under a "
                          "memory budget yet: drop --device-memory, --host-memory and "
                          "--offload-dir, or use --activation-dtype fp32");
  }
  if (app.count("--embedding-layer") > 0 && o.outputs.embeddings.empty()) {
    throw InvalidArgument("--embedding-layer chooses the layer --embeddings writes, which is not "
                          "given");
  }
  if (app.count("--predict-nodes") > 0 && o.outputs.predictions.empty() &&
      o.outputs.embeddings.empty()) {
    throw InvalidArgument("--predict-nodes chooses the rows of --predictions and --embeddings, "
                          "neither of which is given");
  }
  if (o.mode != "sampled") {
    for (const char* flag :
         {"--fanouts", "--batch-size", "--feature-cache", "--prefetch-batches"}) {
      const CLI::Option* option = app.get_option_no_throw(flag);
      if (option != nullptr && option->count() > 0) {
        throw InvalidArgument(std::string(flag) + " shapes sampled training: it needs --mode "
                                                  "sampled");
      }
    }
  }
  if (o.task != "link") {
    // Programs of their own model (the examples) have no link prediction flags.
    for (const char* flag :
         {"--link-split", "--embedding-width", "--hits-k", "--link-split-out", "--link-split-in",
          "--decoder", "--decoder-hidden", "--decoder-layers"}) {
      const CLI::Option* option = app.get_option_no_throw(flag);
      if (option != nullptr && option->count() > 0) {
        throw InvalidArgument(std::string(flag) + " sets up link prediction: it needs --task link");
      }
    }
  } else if (app.count("--link-split") > 0 && !o.link_split_in.empty()) {
    throw InvalidArgument("--link-split draws a split, --link-split-in " + o.link_split_in +
                          " gives one: drop one of them");
  }
  if (o.task == "link" && o.decoder != "mlp" &&
      (app.count("--decoder-hidden") > 0 || app.count("--decoder-layers") > 0)) {
    throw InvalidArgument("--decoder-hidden and --decoder-layers shape the MLP decoder: they need "
                          "--decoder mlp");
  }
  if (o.task == "link" && app.count("--metric") > 0 && o.metric != "roc-auc") {
    throw InvalidArgument(
        "--task link selects the epoch by the validation ROC-AUC: drop --metric " + o.metric);
  }
  if (o.force && o.checkpoint_dir.empty()) {
    throw InvalidArgument("--force only replaces a checkpoint in --checkpoint-dir, which is not "
                          "given");
  }
}

/// The final metrics line: test accuracy (and ROC-AUC with --metric roc-auc) at the selected
/// epoch, or why there is none.
void print_result(const gnn::TrainResult& result, int epochs, gnn::Metric metric) {
  if (result.history.empty()) {
    fmt::print("no epochs trained (--epochs {}): no test accuracy to report\n", epochs);
  } else if (result.test_rows == 0) {
    fmt::print("no test rows: the dataset's test split is empty, so there is no test accuracy "
               "(validation accuracy {:.2f}% at epoch {})\n",
               100.0 * result.best_val.accuracy, result.best_epoch);
  } else {
    fmt::print("{}\n",
               describe_final_result({metric, result.test_at_best_val, result.best_val,
                                      result.final_test, result.best_epoch, result.val_rows > 0}));
  }
}

/// What rank 0 prints after training: the result, timings, rebalances, ranks, stalls, offload,
/// and the report it writes.
void print_summary(const RunSummary& summary, const Options& options) {
  const gnn::TrainResult& result = summary.result;
  print_result(result, options.epochs,
               options.task == "link" ? gnn::Metric::RocAuc : gnn::parse_metric(options.metric));
  const RankFigures& first = summary.per_rank.front();
  if (summary.mode == "sampled") {
    fmt::print("median epoch {:.2f} ms: {} steps of {:.2f} ms, {:.2f} ms of each waiting for its "
               "batch (rank 0); {:.0f} sampled edges and {:.0f} input rows a step; peak memory "
               "{:.1f} MiB\n",
               first.batch_epoch_ms, first.steps, result.median_step_ms, first.batch_wait_ms,
               first.sampled_edges, first.input_rows,
               static_cast<double>(first.peak_rss_bytes) / (1 << 20));
  } else {
    fmt::print("median epoch {:.2f} ms; peak memory {:.1f} MiB\n", result.median_step_ms,
               static_cast<double>(first.peak_rss_bytes) / (1 << 20));
  }
  if (!summary.rebalances.empty()) {
    const RebalanceStep& step = summary.rebalances.back();
    fmt::print("{} rebalance(s); median epoch after the last (epoch {}) {:.2f} ms; compute "
               "imbalance {:.2f} before it, {}\n",
               summary.rebalances.size(), step.epoch, summary.balanced_epoch_ms,
               step.imbalance_before,
               step.imbalance_after > 0 ? fmt::format("{:.2f} after", step.imbalance_after)
                                        : std::string("not measured after (training ended first)"));
  }
  if (summary.ranks > 1) fmt::print("{}", rank_table(summary));
  fmt::print("{}", describe_stalls(summary.stalls));
  if (summary.offloaded && summary.ranks == 1) {
    fmt::print("offload: {}\n", describe_offload(summary.offload_total));
  }
  if (!options.report.empty()) {
    write_report(summary, options.report);
    fmt::print("report written to {}\n", options.report);
  }
}

} // namespace

int train_main(int argc, char** argv, const TrainProgram& program) {
  Options options = defaults_of(program);
  ProgramParts parts;
  parts.description = program.description;
  parts.add_flags = [&](CLI::App& app) { add_flags(app, options, !program.model_builder); };
  parts.stopped_note = [&](int epoch, int signal) -> std::string {
    if (options.checkpoint_dir.empty() || signal == 0) return "";
    return fmt::format("; checkpoint of epoch {} in {} (continue with --resume {})", epoch,
                       options.checkpoint_dir, options.checkpoint_dir);
  };
  parts.run = [&](const CLI::App& app, const std::shared_ptr<comm::Communicator>& comm) {
    const int rank = comm->rank();
    check_flag_combinations(app, options);
    TrainJob job = make_job(options, program);
    job.comm = comm;
    // With a store, the dataset is the store's unless named explicitly (then it must match).
    if (!options.partition_dir.empty() && app.count("--dataset") == 0) job.dataset.clear();
    check_outputs(job, options.report);
    // A report that cannot be written fails now, not after hours of training.
    if (rank == 0 && !options.report.empty()) check_report_path(options.report);
    catch_stop_signals(rank);
    const StdoutProgress loading(rank == 0);
    EpochLinePrinter progress(options.epochs, options.log_every);
    const auto on_epoch = [&](const gnn::EpochStats& s) {
      if (rank == 0) {
        progress(s.epoch,
                 fmt::format("epoch {:>4}/{}  loss {:.4f}  train {}  val {}  {:7.2f} ms", s.epoch,
                             options.epochs, s.train_loss, describe_split_metric(s.train),
                             describe_split_metric(s.val), s.step_ms));
      }
    };
    const RunSummary summary = run_train_job(
        job,
        [](const std::string& line) {
          fmt::print("{}\n", line);
          std::fflush(stdout);
        },
        on_epoch);
    if (rank == 0) print_summary(summary, options);
  };
  return program_main(argc, argv, parts);
}

} // namespace tessera::runtime
