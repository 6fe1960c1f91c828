# pagedkv_library(<target> <export-name>): makes an add_library()'d target a pagedkv library:
# the alias pagedkv::<export-name> (the same name installed), the public include directory as a
# usage requirement (build tree and install tree), C++20 for its users, and the internal settings
# (source root, warnings, sanitizers) PRIVATE so they never reach a consumer.
set(PAGEDKV_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
set_property(GLOBAL PROPERTY PAGEDKV_LIBRARIES "")

function(pagedkv_library target export_name)
  add_library(pagedkv::${export_name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PAGEDKV_GENERATED_INCLUDE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:pagedkv_options>)
  set_property(GLOBAL APPEND PROPERTY PAGEDKV_LIBRARIES ${target})
endfunction()

# include/pagedkv/version.h, generated from the project version.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in
               ${PAGEDKV_GENERATED_INCLUDE_DIR}/pagedkv/version.h @ONLY)
