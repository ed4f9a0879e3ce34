// test_paths.hpp: where tests find the repository's models and fixtures, and a JSON loader.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace troupe::test {

inline std::string source_path(const std::string& rel) { return std::string(TROUPE_SOURCE_DIR) + "/" + rel; }
inline std::string model_path(const std::string& rel) { return source_path("models/" + rel); }
inline std::string fixture_path(const std::string& rel) { return source_path("tests/fixtures/" + rel); }

/// Fixture files name the shared models as "shared/models/X"; the repository carries them in models/X.
inline std::string resolve_fixture_ref(const std::string& p) {
  const std::string prefix = "shared/models/";
  if (p.rfind(prefix, 0) == 0) return model_path(p.substr(prefix.size()));
  return source_path(p);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::json load_json(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

} // namespace troupe::test
