// Checkpoints of a training run: the weights, Adam's state, the epoch and the best validation
// so far, with the run's configuration, in a folder that always holds one complete checkpoint.
//
// Layout of a checkpoint folder DIR:
//   DIR/.tessera-output           the output-folder claim (io::OutputFolder, kind "checkpoint")
//   DIR/latest.json               {"format": "tessera-checkpoint", "format_version": 3,
//                                  "checkpoint": "epoch-000050", "checkpoint_crc": CRC of its
//                                  checkpoint.json, "epoch": 50}: the complete checkpoint
//   DIR/epoch-000050/checkpoint.json   configuration, epoch, Adam step count, best validation,
//                                      and per parameter its name, shape and three array files:
//   DIR/epoch-000050/param-0.value.bin, param-0.adam_m.bin, param-0.adam_v.bin, ...
// A new checkpoint is written into a new epoch folder (every file fsynced and renamed into
// place), then latest.json is replaced atomically to point at it, and only then are the older
// epoch folders removed: a crash at any point leaves the previous checkpoint readable.
#pragma once

#include "tessera/core/op_params.hpp"
#include "tessera/gnn/model.hpp"
#include "tessera/gnn/trainer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::runtime {

/// Version of the checkpoint format; a checkpoint of another version is refused. Version 2
/// records the data's checksum (version 1 checkpoints are read, matched to data by name and
/// shape only); version 3 seals checkpoint.json by its CRC in latest.json ("checkpoint_crc";
/// version 2 checkpoints are read without it).
inline constexpr int kCheckpointFormatVersion = 3;

/// The run a checkpoint belongs to. Resuming requires the same data (dataset, nodes, feature
/// width, classes, and the checksum of its graph, features and labels) and model (name, layer
/// sizes); the training settings may differ.
struct CheckpointRun {
  std::string dataset; ///< the dataset's name
  /// partition::dataset_checksum of the data trained on (8 hex digits; empty in a version 1
  /// checkpoint): another graph under the same name is refused by it.
  std::string dataset_checksum;
  std::int64_t num_nodes = 0, features = 0, classes = 0;
  std::string model_name;
  std::vector<std::int64_t> layer_sizes; ///< {in, hidden..., classes}
  std::uint64_t seed = 0;                ///< of the weights and dropout masks
  AdamConfig adam;
  gnn::ModelConfig model;
  /// Whether the run row-normalized its input features; nullopt in a checkpoint made before it
  /// was recorded (not checked on resume).
  std::optional<bool> row_normalized;
  int epochs = 0; ///< the epochs the run was asked for
  int ranks = 1;  ///< the job's ranks (any count may resume it: weights are replicated)
  /// What the model was trained for: "node" (classes) or "link" (an encoder of nodes whose
  /// output is the embedding; `classes` is then its width). "node" in older checkpoints.
  std::string task = "node";
  /// A link model's pair decoder: "dot", or "mlp" with its hidden width and Linear layers (its
  /// parameters follow the encoder's). "dot" in older checkpoints.
  std::string decoder = "dot";
  std::int64_t decoder_hidden = 0;
  int decoder_layers = 0;
};

/// One checkpoint: what run it is and where training stood.
struct Checkpoint {
  int format_version = kCheckpointFormatVersion;
  CheckpointRun run;
  gnn::TrainState state; ///< state.epoch: the epochs completed
};

/// `run` as checkpoint.json records it (the "run" object): what an exported model carries.
std::string run_json_text(const CheckpointRun& run);

/// Writes `checkpoint` into the checkpoint folder `dir` (which must exist; the caller claims it
/// with io::OutputFolder) as the layout above describes: a new epoch folder, then latest.json,
/// then the older epoch folders removed. Throws IoError naming the file that could not be
/// written; the previous checkpoint is then still the latest.
void write_checkpoint(const std::string& dir, const Checkpoint& checkpoint);

/// Reads the latest complete checkpoint of folder `dir`. Throws IoError when a file is missing,
/// unreadable or not a regular file, and FormatError when one is malformed, of another format
/// version, or inconsistent with the others, each naming the file and the field: latest.json's
/// epoch must be the checkpoint's, and every parameter file must hold the CRC checkpoint.json
/// records for it (so a file from another run, or of another parameter, is refused). It
/// allocates no more than the files hold.
Checkpoint read_checkpoint(const std::string& dir);

/// Throws InvalidArgument naming the first field of the data or model shape where `saved` (a
/// checkpoint's run) and `current` (the run resuming it) differ, with both values, e.g.
/// "checkpoint DIR was made for dataset 'cora', this run trains 'citeseer'". Returns one note
/// per training setting that differs (learning rate, seed, ...), which a resume may change.
std::vector<std::string> check_resumable(const std::string& dir, const CheckpointRun& saved,
                                         const CheckpointRun& current);

} // namespace tessera::runtime
