// cors.hpp: cross-origin resource sharing for the HTTP server. A web page served from another
// origin (a chat UI in the browser) may call the API only when the response names its origin
// in Access-Control-Allow-Origin, and for a POST with a JSON body or an Authorization header
// the browser first sends a preflight OPTIONS request that must be answered without the
// handler (and without authentication: a preflight carries no credentials). Off unless
// origins are allowed (`troupe serve --allowed-origins`).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/expected.hpp"

namespace troupe::transport {

using header_list = std::vector<std::pair<std::string, std::string>>;

/// Origins as given on the command line, checked and written as browsers send them: "*", or
/// scheme://host[:port] with an http(s) scheme (lower-cased scheme and host, no path, no
/// trailing slash); "null" (sandboxed frames, file:// pages) is refused. invalid_argument
/// names the value.
expected<std::vector<std::string>> parse_origins(const std::vector<std::string>& given);

class cors_policy {
 public:
  cors_policy() = default;
  /// "*" allows every origin; otherwise exact origins ("https://chat.example.com").
  explicit cors_policy(std::vector<std::string> origins);

  bool enabled() const { return !origins_.empty(); }
  /// Whether a request carrying this Origin header may read the answer.
  bool allows(const std::string& origin) const;

  /// Headers for the answer to a request (lower-case header names as keys): the allowed
  /// origin, and Vary: Origin when the answer depends on it.
  header_list response_headers(const std::map<std::string, std::string>& request) const;

  /// A preflight: OPTIONS with an Origin and an Access-Control-Request-Method.
  static bool is_preflight(const std::string& method,
                           const std::map<std::string, std::string>& request);
  /// The headers of a 204 answering an allowed preflight; none when the origin is not allowed
  /// (the request then goes to the handler, which refuses OPTIONS).
  header_list preflight_headers(const std::map<std::string, std::string>& request) const;

 private:
  std::vector<std::string> origins_;
  bool any_ = false;
};

} // namespace troupe::transport
