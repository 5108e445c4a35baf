// Every message tag the library's exchanges use, in one place: exchanges that may be in flight
// together on one communicator must not share a tag, and this list is where that is checked.
#pragma once

#include "tessera/core/error.hpp"

#include <string>

namespace tessera::comm::tags {

inline constexpr int kSparseRowCounts = 7010; ///< gather_sparse_rows: row lengths
inline constexpr int kSparseRows = 7011;      ///< gather_sparse_rows: columns and values
inline constexpr int kLinkProbe = 7020;       ///< measure_links
inline constexpr int kWatchdogPing = 7030;    ///< a timed-out rank asking who still answers
inline constexpr int kWatchdogPong = 7031;    ///< ... and the answers
inline constexpr int kHaloPlan = 7100;        ///< HaloPlan::build
inline constexpr int kTiles = 7200;           ///< rank 0 handing out tiles
inline constexpr int kFeatures = 7300;        ///< the one-off fetch of ghost input features
inline constexpr int kGhostDegrees = 7310;    ///< the check of ghost rows' degrees at setup
inline constexpr int kNodeOutputs = 7320;     ///< per-node outputs gathered on rank 0
inline constexpr int kPairEnds = 7330;        ///< link prediction: embeddings of remote pair ends
inline constexpr int kSampleRequests = 7340;  ///< sampling over ranks: nodes for their owners
inline constexpr int kSampleAnswers = 7341;   ///< ... and the neighbours the owners drew
inline constexpr int kFeatureRequests = 7342; ///< sampled batches: input rows asked of owners
inline constexpr int kFeatureRows = 7343;     ///< ... and the rows they send
inline constexpr int kLayersBegin = 7401;     ///< layers' halo exchanges, kChannels per layer
inline constexpr int kLayersEnd = 32768;      ///< MPI guarantees tags up to 32767

/// A layer's exchanges that may be in flight at once (a stale forward gather stays open while
/// the backward's scatter-add and an evaluation's gather run).
enum class Channel { Forward = 0, Backward = 1, Evaluation = 2 };
inline constexpr int kChannels = 3;

/// The tag of aggregating layer `layer`'s exchanges on `channel`. Throws InvalidArgument past
/// the range.
inline int layer(int layer, Channel channel = Channel::Forward) {
  if (layer < 0 || layer >= (kLayersEnd - kLayersBegin) / kChannels) {
    throw InvalidArgument("no message tag for layer " + std::to_string(layer));
  }
  return kLayersBegin + kChannels * layer + static_cast<int>(channel);
}

/// What exchanges with `tag`, for messages: "the halo exchange of layer 2 (forward)", "the
/// hand-out of tiles", "messages of tag 9".
inline std::string describe(int tag) {
  switch (tag) {
  case kSparseRowCounts:
  case kSparseRows:
    return "the fetch of sparse ghost rows";
  case kLinkProbe:
    return "the measurement of the links";
  case kHaloPlan:
    return "the building of the halo plan";
  case kTiles:
    return "the hand-out of tiles";
  case kFeatures:
    return "the fetch of the ghost input features";
  case kGhostDegrees:
    return "the check of the ghost rows' degrees";
  case kNodeOutputs:
    return "the gathering of predictions and embeddings";
  case kPairEnds:
    return "the exchange of link prediction's pair ends";
  default:
    break;
  }
  if (tag >= kLayersBegin && tag < kLayersEnd) {
    static const char* const kChannelNames[kChannels] = {"forward", "backward", "evaluation"};
    return "the halo exchange of layer " + std::to_string((tag - kLayersBegin) / kChannels) + " (" +
           kChannelNames[(tag - kLayersBegin) % kChannels] + ")";
  }
  return "messages of tag " + std::to_string(tag);
}

} // namespace tessera::comm::tags
