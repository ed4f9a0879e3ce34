// common.cpp: bundled paths, verbose model opening and progress lines (common.hpp).
#include "common.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <utility>

#include <fmt/core.h>

#include "exec/memory_plan.hpp"

namespace troupe::cli {

std::string bundled_path(const std::string& rel) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(TROUPE_SOURCE_DIR) / "models" / rel;
  if (fs::exists(src)) return src.string();
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p : {exe.parent_path() / "../share/troupe/models" / rel,
                              exe.parent_path() / "../../models" / rel})
      if (fs::exists(p)) return fs::weakly_canonical(p).string();
  }
  return src.string();
}

std::string default_model_path() {
  if (const char* env = std::getenv("TROUPE_MODEL"); env && *env) return env;
  return bundled_path("stories260K/stories260K.gguf");
}

expected<std::shared_ptr<const model_source>> open_model_verbose(const std::string& path,
                                                                 bool quiet) {
  const auto t0 = std::chrono::steady_clock::now();
  auto m = open_model(path);
  if (!m) return m;
  const double ms =
      std::chrono::duration<double, std::milli>((std::chrono::steady_clock::now() - t0)).count();
  if (!quiet) {
    const auto& c = (*m)->config;
    // the weights the graph reads (LayerNorm biases and every tensor a family loads counted, each
    // shared one once); the config's own estimate where the graph cannot be built here
    const auto counted = exec::count_parameters(**m);
    fmt::print(
        stderr,
        "troupe: loaded {} ({} {}, {:.2f}M parameters, {} layers, {} tokenizer) in {:.1f} ms\n",
        path, (*m)->format, c.arch, static_cast<double>(counted ? *counted : c.parameters()) / 1e6,
        c.n_layer, (*m)->tok->kind(), ms);
  }
  return m;
}

double byte_unit(const std::string& unit) {
  static const std::pair<const char*, double> units[] = {{"KiB", 1024.0},
                                                         {"K", 1024.0},
                                                         {"MiB", 1048576.0},
                                                         {"M", 1048576.0},
                                                         {"GiB", 1073741824.0},
                                                         {"G", 1073741824.0},
                                                         {"TiB", 1099511627776.0},
                                                         {"T", 1099511627776.0},
                                                         {"KB", 1e3},
                                                         {"MB", 1e6},
                                                         {"GB", 1e9},
                                                         {"TB", 1e12}};
  for (const auto& [name, bytes] : units)
    if (unit == name) return bytes;
  return 0;
}

expected<int64_t> parse_bytes(const std::string& text, const char* what) {
  size_t used = 0;
  double v = 0;
  // decimal digits and one point only (stod would take "0x10" and "1e3")
  const size_t digits = text.find_first_not_of("0123456789.");
  if (digits != 0 && std::count(text.begin(), text.end(), '.') <= 1) try {
      v = std::stod(text.substr(0, digits), &used);
    } catch (const std::exception&) {
      used = 0;
    }
  const double mult = used ? byte_unit(text.substr(used)) : 0;
  if (mult == 0 || !std::isfinite(v) || v <= 0 || v * mult > 4.0e18)
    return make_error(errc::invalid_argument, "{} '{}': give bytes with a unit (80GiB, 141GB)",
                      what, text);
  return static_cast<int64_t>(v * mult);
}

expected<dtype> parse_kv_dtype(const std::string& s) {
  const auto t = parse_dtype(s);
  if (!t || (*t != dtype::f32 && *t != dtype::f16 && *t != dtype::bf16))
    return make_error(errc::invalid_argument, "--kv-dtype '{}': give f32, f16 or bf16", s);
  return *t;
}

expected<dtype> parse_quantize(const std::string& s) {
  if (s.empty() || s == "none") return dtype::f32;
  const auto t = parse_dtype(s);
  if (!t || (*t != dtype::q8_0 && *t != dtype::q4_0))
    return make_error(errc::invalid_argument, "--quantize '{}': give q8_0, q4_0 or none", s);
  return *t;
}

int fail(const error& e) {
  fmt::print(stderr, "troupe: {}\n", e.to_string());
  return e.code == errc::invalid_argument ? 2 : 1;
}

progress_line::progress_line(std::string label, bool enabled)
    : label_(std::move(label))
    , tty_(enabled && isatty(STDERR_FILENO)) {}

void progress_line::update(int64_t done, int64_t total) {
  if (!tty_ || total <= 0) return;
  const int pct = static_cast<int>(100 * done / total);
  if (pct == last_percent_) return;
  last_percent_ = pct;
  const int width = 30, fill = pct * width / 100;
  fmt::print(stderr, "\r{} [{}{}] {:3d}%", label_, std::string(fill, '#'),
             std::string(width - fill, ' '), pct);
  std::fflush(stderr);
}

void progress_line::finish(const std::string& tail) {
  if (tty_) fmt::print(stderr, "\r\033[K");
  fmt::print(stderr, "{} {}\n", label_, tail);
}

} // namespace troupe::cli
