// error.hpp: Troupe's error vocabulary. `errc` is the scoped error enum every module below
// actors/ returns inside `expected<T>` (see expected.hpp); `error` pairs a code with context
// text that says what was wrong and where ("model.gguf: tensor 'blk.0.attn_q.weight': offset
// 9000 past end of file (size 8192)"). Foreign codes (errno, CUDA, UCX, Asio) are turned into
// these at the edge. Plain value types, no allocation unless a message is set.
// Tests: tests/core/expected_test.cpp
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/core.h>

namespace troupe {

enum class errc : uint8_t {
  invalid_argument = 1, // a caller passed a value out of range or of the wrong kind
  io_error,             // the operating system refused a file or socket operation
  corrupt_file,         // bytes read from a file contradict its format
  unsupported,          // well-formed, but not implemented here (dtype, architecture, op)
  not_found,            // a named thing (tensor, key, file, model, route) does not exist
  shape_mismatch,       // tensor shapes disagree with each other or with the config
  out_of_memory,        // an allocation or a KV-block request could not be met
  out_of_range,         // an index, offset or id lies outside its container
  timeout,              // a peer or a step did not answer in time
  cancelled,            // the work was cancelled by its owner
  unavailable,          // a component is down or restarting; retry later
  busy,                 // too much work is queued already; retry later (HTTP 429)
  protocol_error,       // a peer sent bytes that break the wire protocol
  internal,             // a bug: an invariant of Troupe itself does not hold
};

/// Short stable name of a code ("corrupt_file"), for logs and metrics labels.
std::string_view to_string(errc code);

struct error {
  errc code = errc::internal;
  std::string message;

  /// "corrupt_file: model.gguf: ..." for logs and error replies.
  std::string to_string() const;
};

/// Builds an error with a fmt-formatted message.
template <class... Ts>
error make_error(errc code, fmt::format_string<Ts...> text, Ts&&... xs) {
  return error{code, fmt::format(text, std::forward<Ts>(xs)...)};
}

} // namespace troupe
