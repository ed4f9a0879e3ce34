// log.hpp: Troupe's one logging facade. Messages carry a component tag and key=value context
// ("loader: loaded tensors=48 ms=12"). The sink is spdlog (log.cpp); this header includes only
// fmt so it stays cheap to include everywhere. Thread-safe. Nothing per token at info level.
#pragma once

#include <string_view>
#include <utility>

#include <fmt/core.h>

namespace troupe {

enum class log_level : int { trace, debug, info, warn, error, off };

/// Writes one line for `component` at `level` (no-op below the current level).
void log_write(log_level level, std::string_view component, std::string_view text);
/// Sets the minimum level; also read once from TROUPE_LOG (trace|debug|info|warn|error|off).
void log_set_level(log_level level);
log_level log_get_level();
/// Parses a level name; returns false when the name is unknown.
bool log_parse_level(std::string_view name, log_level& out);

template <class... Ts>
void log(log_level level, std::string_view component, fmt::format_string<Ts...> text, Ts&&... xs) {
  if (level < log_get_level()) return;
  log_write(level, component, fmt::format(text, std::forward<Ts>(xs)...));
}

#define TROUPE_LOG_DEBUG(component, ...)                                                           \
  ::troupe::log(::troupe::log_level::debug, component, __VA_ARGS__)
#define TROUPE_LOG_INFO(component, ...)                                                            \
  ::troupe::log(::troupe::log_level::info, component, __VA_ARGS__)
#define TROUPE_LOG_WARN(component, ...)                                                            \
  ::troupe::log(::troupe::log_level::warn, component, __VA_ARGS__)
#define TROUPE_LOG_ERROR(component, ...)                                                           \
  ::troupe::log(::troupe::log_level::error, component, __VA_ARGS__)

} // namespace troupe
