# Install rules: public headers (and the generated version.h), every pagedkv library, the
# `pagedkv` tool, the CUDA plugin, a CMake package (pagedkvConfig.cmake + version file, targets
# pagedkv::cache, pagedkv::kernels, pagedkv::engine, ...) and a pkg-config file pagedkv.pc.
include(CMakePackageConfigHelpers)

set(PAGEDKV_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pagedkv)

# Headers only: the README.md of each folder stays in the checkout.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pagedkv
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PAGEDKV_GENERATED_INCLUDE_DIR}/pagedkv/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pagedkv COMPONENT devel)

get_property(pagedkv_libraries GLOBAL PROPERTY PAGEDKV_LIBRARIES)
set(pagedkv_installed ${pagedkv_libraries})
if(TARGET pagedkv)
  set_target_properties(pagedkv PROPERTIES EXPORT_NAME pagedkv)
  list(APPEND pagedkv_installed pagedkv)
endif()
install(TARGETS ${pagedkv_installed} EXPORT pagedkvTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(EXPORT pagedkvTargets NAMESPACE pagedkv:: DESTINATION ${PAGEDKV_CMAKE_INSTALL_DIR}
        COMPONENT devel)

# What the installed package needs from find_package in its consumer (see pagedkvConfig.cmake.in).
set(PAGEDKV_CONFIG_REPLAY ${PAGEDKV_BUILD_REPLAY})
set(PAGEDKV_CONFIG_EVENTS ${PAGEDKV_BUILD_EVENTS})
set(PAGEDKV_CONFIG_REDIS ${PAGEDKV_BUILD_REDIS})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pagedkvConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pagedkvConfig.cmake INSTALL_DESTINATION ${PAGEDKV_CMAKE_INSTALL_DIR})
# 0.x: a minor version may break the API, so 0.2 accepts 0.2.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pagedkvConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pagedkvConfig.cmake
              ${PROJECT_BINARY_DIR}/pagedkvConfigVersion.cmake
        DESTINATION ${PAGEDKV_CMAKE_INSTALL_DIR} COMPONENT devel)

# pkg-config: the runtime core (engine and everything below it), static link order.
set(PAGEDKV_PC_LIBS "-lpagedkv_engine -lpagedkv_shift -lpagedkv_shift_tracker -lpagedkv_model")
string(APPEND PAGEDKV_PC_LIBS " -lpagedkv_scheduler -lpagedkv_kernels -lpagedkv_cache")
if(PAGEDKV_BUILD_REDIS)
  # The engine links the Redis tier; it needs hiredis after pagedkv's own libraries.
  string(REPLACE "-lpagedkv_engine" "-lpagedkv_engine -lpagedkv_tier_redis" PAGEDKV_PC_LIBS
         "${PAGEDKV_PC_LIBS}")
  string(APPEND PAGEDKV_PC_LIBS " -lhiredis")
endif()
# The file finds its prefix from its own directory (relocatable installs).
file(RELATIVE_PATH PAGEDKV_PC_UP /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/pagedkv.pc.in ${PROJECT_BINARY_DIR}/pagedkv.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pagedkv.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT devel)
