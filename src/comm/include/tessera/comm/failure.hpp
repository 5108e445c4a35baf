// One rank's failure made every rank's: so bad input on one rank fails the whole job with its
// message instead of leaving the other ranks waiting in the next collective.
#pragma once

#include "tessera/comm/communicator.hpp"

#include <exception>
#include <string>

namespace tessera::comm {

/// Makes `root`'s failure (null: none) every rank's: `root` rethrows its exception, the others
/// throw one of the same type (IoError, FormatError, InvalidArgument; Error otherwise) saying
/// "rank R WHAT_ROOT_DID: message". One broadcast; so one rank's bad input fails the whole job
/// with its message instead of leaving the other ranks waiting. Collective over `comm`.
void share_failure(Communicator& comm, int root, const std::exception_ptr& failure,
                   const std::string& what_root_did);

/// share_failure from the lowest rank whose `failure` is set, when any is; returns when none
/// failed. For steps any rank may fail alone. Collective over `comm`.
void share_first_failure(Communicator& comm, const std::exception_ptr& failure,
                         const std::string& what_it_did);

} // namespace tessera::comm
