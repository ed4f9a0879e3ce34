// error.cpp: names of error codes and the one-line rendering of an error (error.hpp).
#include "core/error.hpp"

namespace troupe {

std::string_view to_string(errc code) {
  switch (code) {
  case errc::invalid_argument:
    return "invalid_argument";
  case errc::io_error:
    return "io_error";
  case errc::corrupt_file:
    return "corrupt_file";
  case errc::unsupported:
    return "unsupported";
  case errc::not_found:
    return "not_found";
  case errc::shape_mismatch:
    return "shape_mismatch";
  case errc::out_of_memory:
    return "out_of_memory";
  case errc::out_of_range:
    return "out_of_range";
  case errc::timeout:
    return "timeout";
  case errc::cancelled:
    return "cancelled";
  case errc::unavailable:
    return "unavailable";
  case errc::busy:
    return "busy";
  case errc::protocol_error:
    return "protocol_error";
  case errc::internal:
    return "internal";
  }
  return "unknown";
}

std::string error::to_string() const {
  std::string out(troupe::to_string(code));
  if (!message.empty()) {
    out += ": ";
    out += message;
  }
  return out;
}

} // namespace troupe
