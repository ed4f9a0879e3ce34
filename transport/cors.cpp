// cors.cpp: which origins may read the API's answers, and the headers that say so (cors.hpp).
#include "transport/cors.hpp"

#include <algorithm>
#include <cctype>

namespace troupe::transport {
namespace {

const std::string* find(const std::map<std::string, std::string>& h, const char* name) {
  auto it = h.find(name);
  return it == h.end() ? nullptr : &it->second;
}

// A header value echoed back: only the characters of header names (RFC 9110 tokens) and the
// list's commas and spaces, so a hostile request cannot put a line break, a colon or anything
// else into the answer's headers.
std::string token_list(const std::string& v) {
  static const std::string extra = "!#$%&'*+-.^_`|~, ";
  std::string out;
  for (char c : v)
    if (std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string::npos) out += c;
  return out;
}

// An origin as given on the command line, as a browser sends it: no surrounding spaces
// ("a, b" split at the comma), no trailing slash.
std::string normalised(std::string o) {
  while (!o.empty() && std::isspace(static_cast<unsigned char>(o.back()))) o.pop_back();
  size_t b = 0;
  while (b < o.size() && std::isspace(static_cast<unsigned char>(o[b]))) ++b;
  o.erase(0, b);
  if (o.size() > 1 && o.back() == '/') o.pop_back();
  return o;
}

} // namespace

expected<std::vector<std::string>> parse_origins(const std::vector<std::string>& given) {
  std::vector<std::string> out;
  for (const auto& g : given) {
    std::string o = normalised(g);
    if (o.empty()) continue;
    if (o == "*") {
      out.push_back(o);
      continue;
    }
    const auto bad = [&](const char* why) {
      return make_error(errc::invalid_argument, "--allowed-origins '{}': {}", g, why);
    };
    if (o == "null") return bad("'null' would let any sandboxed page or file:// page in");
    const size_t colon = o.find("://");
    if (colon == std::string::npos) return bad("give scheme://host[:port], e.g. https://a.com");
    for (size_t i = 0; i < o.size(); ++i) // scheme and host are case-insensitive
      o[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(o[i])));
    const std::string scheme = o.substr(0, colon), rest = o.substr(colon + 3);
    if (scheme != "http" && scheme != "https") return bad("the scheme must be http or https");
    if (rest.empty() || rest.find_first_of("/?#@ ") != std::string::npos)
      return bad("an origin is scheme://host[:port], with no path, query or user");
    out.push_back(o);
  }
  return out;
}

cors_policy::cors_policy(std::vector<std::string> origins) {
  for (auto& o : origins)
    if (auto n = normalised(std::move(o)); !n.empty()) origins_.push_back(std::move(n));
  any_ = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
}

bool cors_policy::allows(const std::string& origin) const {
  if (origin.empty()) return false;
  return any_ || std::find(origins_.begin(), origins_.end(), origin) != origins_.end();
}

header_list cors_policy::response_headers(const std::map<std::string, std::string>& req) const {
  if (!enabled()) return {};
  // "*" answers with the wildcard (the response is not credentialed: the API key travels in a
  // header the page sets itself); an exact list echoes the origin, and every answer says it
  // varies with the origin (a cache must not hand one origin's answer to another)
  header_list h;
  if (!any_) h.emplace_back("Vary", "Origin");
  const std::string* origin = find(req, "origin");
  if (!origin || !allows(*origin)) return h;
  h.emplace_back("Access-Control-Allow-Origin", any_ ? "*" : *origin);
  h.emplace_back("Access-Control-Expose-Headers", "Retry-After");
  return h;
}

bool cors_policy::is_preflight(const std::string& method,
                               const std::map<std::string, std::string>& req) {
  return method == "OPTIONS" && find(req, "origin") && find(req, "access-control-request-method");
}

header_list cors_policy::preflight_headers(const std::map<std::string, std::string>& req) const {
  const std::string* origin = find(req, "origin");
  if (!origin || !allows(*origin)) return {};
  header_list h = response_headers(req);
  h.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
  const std::string* asked = find(req, "access-control-request-headers");
  const std::string allowed = asked ? token_list(*asked) : "";
  h.emplace_back("Access-Control-Allow-Headers",
                 allowed.empty() ? "Authorization, Content-Type" : allowed);
  h.emplace_back("Access-Control-Max-Age", "600");
  if (!any_) { // the answer also varies with what was asked
    for (auto& [k, v] : h)
      if (k == "Vary") v = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";
  }
  return h;
}

} // namespace troupe::transport
