// log.cpp: the spdlog sink behind log.hpp: one stderr logger, pattern
// "[time] [level] component: text", level from TROUPE_LOG at first use (default info).
#include "core/log.hpp"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace troupe {
namespace {

std::atomic<int>& level_ref() {
  static std::atomic<int> level{[] {
    log_level lv = log_level::info;
    if (const char* env = std::getenv("TROUPE_LOG")) log_parse_level(env, lv);
    return static_cast<int>(lv);
  }()};
  return level;
}

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_color_mt("troupe");
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *instance;
}

} // namespace

bool log_parse_level(std::string_view name, log_level& out) {
  static constexpr std::pair<std::string_view, log_level> names[] = {
      {"trace", log_level::trace}, {"debug", log_level::debug}, {"info", log_level::info},
      {"warn", log_level::warn},   {"error", log_level::error}, {"off", log_level::off}};
  for (auto& [n, lv] : names) {
    if (n == name) {
      out = lv;
      return true;
    }
  }
  return false;
}

void log_set_level(log_level level) {
  level_ref().store(static_cast<int>(level));
}
log_level log_get_level() {
  return static_cast<log_level>(level_ref().load(std::memory_order_relaxed));
}

void log_write(log_level level, std::string_view component, std::string_view text) {
  if (level < log_get_level()) return;
  auto lv = static_cast<spdlog::level::level_enum>(static_cast<int>(level));
  logger().log(lv, "{}: {}", component, text);
}

} // namespace troupe
