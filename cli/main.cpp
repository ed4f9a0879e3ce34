// main.cpp: the `troupe` command. Subcommands are added by the issues that build them.
#include <cstring>

#include <fmt/core.h>

#include "kernels/device.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    fmt::print("troupe {}: serve large language models split across devices\n\n", TROUPE_VERSION);
    fmt::print("usage: troupe <command> [options]\n  --version  print the version\n");
    return 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    fmt::print("troupe {} (cuda: {})\n", TROUPE_VERSION,
               troupe::kernels::cuda_available() ? "yes" : "no");
    return 0;
  }
  fmt::print(stderr, "troupe: unknown command '{}'\n", argv[1]);
  return 2;
}
