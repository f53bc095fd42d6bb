# Install rules and the package config that lets outside projects
#   find_package(aotpipe CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE aotpipe::aotpipe)
include(CMakePackageConfigHelpers)
set(AOTPIPE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/aotpipe)

install(EXPORT aotpipeTargets NAMESPACE aotpipe:: DESTINATION ${AOTPIPE_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/aotpipeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/aotpipeConfig.cmake
  INSTALL_DESTINATION ${AOTPIPE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/aotpipeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/aotpipeConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/aotpipeConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/FindAotpipeTorch.cmake
  DESTINATION ${AOTPIPE_INSTALL_CMAKEDIR})
