# deps_gpu_only.cmake: the dependencies of a GPU-only build (TROUPE_GPU_ONLY: the kernels up to
# the executor, the op harness, the device tests and gpu_bench; no CAF, UCX, Boost, OpenSSL or
# OpenBLAS) for a machine that has CUDA and a compiler but not Troupe's Debian packages: the
# lent GPU machines. TROUPE_DEPS is the folder bench/gpu/pack_deps.sh filled (unpacked from
# .gpu-deps.tar.xz): headers of fmt, spdlog, nlohmann-json, GoogleTest, PCRE2 and utf8proc, and
# static libraries of the last three. fmt and spdlog are used header-only.
set(TROUPE_DEPS "" CACHE PATH "the folder bench/gpu/pack_deps.sh made")
if(NOT EXISTS "${TROUPE_DEPS}/include/fmt/core.h")
  message(FATAL_ERROR "TROUPE_GPU_ONLY needs TROUPE_DEPS (bench/gpu/pack_deps.sh): ${TROUPE_DEPS}")
endif()
find_package(Threads REQUIRED)
set(_inc "${TROUPE_DEPS}/include")
add_library(fmt::fmt INTERFACE IMPORTED)
set_target_properties(fmt::fmt PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_inc}"
  INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
add_library(spdlog::spdlog INTERFACE IMPORTED)
set_target_properties(spdlog::spdlog PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_inc}"
  INTERFACE_COMPILE_DEFINITIONS "SPDLOG_HEADER_ONLY=1;SPDLOG_FMT_EXTERNAL=1"
  INTERFACE_LINK_LIBRARIES "fmt::fmt;Threads::Threads")
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_inc}")
foreach(lib PCRE2:pcre2-8 UTF8PROC:utf8proc)
  string(REPLACE ":" ";" parts ${lib})
  list(GET parts 0 name)
  list(GET parts 1 file)
  add_library(PkgConfig::${name} STATIC IMPORTED)
  set_target_properties(PkgConfig::${name} PROPERTIES
    IMPORTED_LOCATION "${TROUPE_DEPS}/lib/lib${file}.a" INTERFACE_INCLUDE_DIRECTORIES "${_inc}")
endforeach()
set_property(TARGET PkgConfig::PCRE2 PROPERTY INTERFACE_COMPILE_DEFINITIONS PCRE2_STATIC=1)
add_library(GTest::gtest STATIC IMPORTED)
set_target_properties(GTest::gtest PROPERTIES IMPORTED_LOCATION "${TROUPE_DEPS}/lib/libgtest.a"
  INTERFACE_INCLUDE_DIRECTORIES "${_inc}" INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(GTest::gtest_main STATIC IMPORTED)
set_target_properties(GTest::gtest_main PROPERTIES
  IMPORTED_LOCATION "${TROUPE_DEPS}/lib/libgtest_main.a" INTERFACE_LINK_LIBRARIES GTest::gtest)
add_library(GTest::gmock STATIC IMPORTED)
set_target_properties(GTest::gmock PROPERTIES IMPORTED_LOCATION "${TROUPE_DEPS}/lib/libgmock.a"
  INTERFACE_LINK_LIBRARIES GTest::gtest)
include(${CMAKE_CURRENT_LIST_DIR}/cuda.cmake)
