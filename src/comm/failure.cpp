#include "tessera/comm/failure.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fmt/core.h>
#include <vector>

namespace tessera::comm {

void share_failure(Communicator& comm, int root, const std::exception_ptr& failure,
                   const std::string& what_root_did) {
  std::string text = "-";
  if (comm.rank() == root && failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const OutputExists& e) {
      text = std::string("O") + e.what();
    } catch (const IoError& e) {
      text = std::string("I") + e.what();
    } catch (const FormatError& e) {
      text = std::string("F") + e.what();
    } catch (const InvalidArgument& e) {
      text = std::string("A") + e.what();
    } catch (const std::exception& e) {
      text = std::string("E") + e.what();
    }
  }
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                               reinterpret_cast<const std::byte*>(text.data()) + text.size());
  comm.broadcast(bytes, root);
  text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text == "-") return;
  if (comm.rank() == root) std::rethrow_exception(failure);
  const std::string message = fmt::format("rank {} {}: {}", root, what_root_did, text.substr(1));
  switch (text.front()) {
  case 'O':
    throw OutputExists(message);
  case 'I':
    throw IoError(message);
  case 'F':
    throw FormatError(message);
  case 'A':
    throw InvalidArgument(message);
  default:
    throw Error(message);
  }
}

void share_first_failure(Communicator& comm, const std::exception_ptr& failure,
                         const std::string& what_it_did) {
  std::vector<std::int64_t> failed(static_cast<std::size_t>(comm.size()), 0);
  failed[static_cast<std::size_t>(comm.rank())] = failure ? 1 : 0;
  comm.allreduce_sum(failed); // an allgather: each rank set only its own entry
  const auto first = std::find(failed.begin(), failed.end(), 1);
  if (first == failed.end()) return;
  const int root = static_cast<int>(first - failed.begin());
  share_failure(comm, root, root == comm.rank() ? failure : nullptr, what_it_did);
}

} // namespace tessera::comm
