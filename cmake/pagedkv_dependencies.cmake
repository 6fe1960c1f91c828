# Dependencies (Debian packages; scripts/install_deps.sh installs them). Each is searched only when
# a part that needs it is enabled: the cache and kernels need Abseil and xxHash's header alone.
find_package(absl REQUIRED)
find_package(Threads REQUIRED)
# Google Highway (libhwy-dev): the CPU backend's vector kernels with run-time target dispatch.
find_package(hwy REQUIRED CONFIG)
# nlohmann-json (header-only): the model loaders read config.json, tokenizer.json and safetensors
# headers with it, so it is always needed.
find_package(nlohmann_json REQUIRED)
# xxHash is used header-only (XXH_INLINE_ALL), so no installed target links a library for it.
find_path(PAGEDKV_XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
add_library(pagedkv_xxhash_headers INTERFACE)
target_include_directories(pagedkv_xxhash_headers INTERFACE ${PAGEDKV_XXHASH_INCLUDE_DIR})

if(PAGEDKV_BUILD_EVENTS)
  # KV events on the wire (cache/events/kv_event_codec*, engine/serve/events/): msgpack-cxx
  # (headers, needs Boost's headers) and cppzmq over libzmq.
  find_package(Boost REQUIRED)
  find_package(msgpack REQUIRED CONFIG)
  find_package(cppzmq REQUIRED CONFIG)
endif()
if(PAGEDKV_BUILD_REPLAY)
  find_package(simdjson REQUIRED)
  find_package(ZLIB REQUIRED)
endif()
if(PAGEDKV_BUILD_REDIS)
  # The Redis KV tier (cache/tiers/redis/): hiredis through pkg-config (libhiredis-dev).
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET GLOBAL hiredis)
endif()
if(PAGEDKV_BUILD_TOOLS OR PAGEDKV_BUILD_TESTS)
  find_package(CLI11 REQUIRED)
  # `pagedkv serve` (engine/serve/http/): cpp-httplib, Debian's build (libcpp-httplib-dev). Its
  # pkg-config Cflags carry the feature macros the library was built with (OpenSSL, zlib,
  # brotli), which change its classes' layout, so every includer must use them.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib)
endif()
if(PAGEDKV_BUILD_TESTS OR PAGEDKV_BUILD_BENCH)
  # Tests and benchmarks compare against the xxHash library itself.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
endif()
if(PAGEDKV_BUILD_TESTS AND PAGEDKV_BUILD_PYTHON)
  # The pytest suite parses the Prometheus text of `generate --metrics-file` with Debian's
  # prometheus_client (python3-prometheus-client), a test-only dependency.
  execute_process(COMMAND ${PAGEDKV_PYTHON_EXECUTABLE} -c "import prometheus_client"
                  RESULT_VARIABLE pagedkv_no_prometheus_client OUTPUT_QUIET ERROR_QUIET)
  if(pagedkv_no_prometheus_client)
    message(WARNING "python3-prometheus-client is missing: its pytest fails until "
                    "scripts/install_deps.sh installs it")
  endif()
endif()
if(PAGEDKV_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  enable_testing()
endif()
if(PAGEDKV_BUILD_BENCH)
  find_package(benchmark REQUIRED)
  # OpenBLAS (libopenblas-dev), only for the GEMM comparison benchmark; skipped when absent.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(OPENBLAS IMPORTED_TARGET openblas)
endif()
