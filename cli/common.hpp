// common.hpp: shared pieces of the `troupe` subcommands: where the bundled model lives,
// opening a model with a progress line on the terminal, and turning errors into exit codes.
#pragma once

#include <memory>
#include <string>

#include "arch/model_source.hpp"

namespace troupe::cli {

/// The bundled stories260K GGUF: $TROUPE_MODEL, else the source tree's models/, else
/// models/ beside the executable's install prefix.
std::string default_model_path();
/// A file shipped in models/ (vocabularies for synth).
std::string bundled_path(const std::string& rel);
/// Opens a model, printing what it is and how long it took to stderr (unless quiet).
expected<std::shared_ptr<const model_source>> open_model_verbose(const std::string& path,
                                                                 bool quiet);
/// The KV cache's element type from --kv-dtype (f32, f16 or bf16).
expected<dtype> parse_kv_dtype(const std::string& s);
/// --quantize: q8_0 / q4_0, or none (dtype::f32: the weights as published).
expected<dtype> parse_quantize(const std::string& s);
/// Prints "troupe: <error>" to stderr and returns an exit code (2 for bad arguments, 1 else).
/// Bytes in one of a unit: KiB / K, MiB / M, GiB / G, TiB / T, KB, MB, GB, TB; 0 for any other.
double byte_unit(const std::string& unit);
/// "80GiB", "141GB", "1.5TiB" (a unit is required); `what` names the option in errors.
expected<int64_t> parse_bytes(const std::string& text, const char* what);

int fail(const error& e);

/// A one-line progress bar on stderr when it is a terminal; silent otherwise.
class progress_line {
 public:
  progress_line(std::string label, bool enabled);
  void update(int64_t done, int64_t total);
  void finish(const std::string& tail);

 private:
  std::string label_;
  bool tty_;
  int last_percent_ = -1;
};

} // namespace troupe::cli
