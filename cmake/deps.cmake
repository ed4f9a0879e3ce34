# deps.cmake: finds Troupe's system dependencies (installed by scripts/setup.sh) and makes
# imported targets for those that ship no CMake config (CAF 0.17.6 from Debian). CUDA is
# optional: TROUPE_HAVE_CUDA is set when nvcc is found and TROUPE_CUDA is ON.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)

# CAF 0.17.6: no CMake config and no .pc file.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIB caf_core REQUIRED)
find_library(CAF_IO_LIB caf_io REQUIRED)
add_library(CAF::core SHARED IMPORTED)
set_target_properties(CAF::core PROPERTIES IMPORTED_LOCATION ${CAF_CORE_LIB}
  INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR} INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(CAF::io SHARED IMPORTED)
set_target_properties(CAF::io PROPERTIES IMPORTED_LOCATION ${CAF_IO_LIB}
  INTERFACE_LINK_LIBRARIES CAF::core)

find_package(ucx REQUIRED)
find_package(OpenSSL REQUIRED) # HMAC-SHA256 for the join of worker processes
find_package(Boost 1.74 REQUIRED)

include(${CMAKE_CURRENT_LIST_DIR}/cuda.cmake)
