# aotpipe_add_component(NAME SOURCES... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...] [INTERNAL_HEADERS ...])
# One library per component folder: target aotpipe_<name>, alias aotpipe::<name>, headers of the
# folder reachable in the tree as <aotpipe/<name>/x.h> and installed to include/aotpipe/<name>/,
# except `internal/` folders and the INTERNAL_HEADERS (file names): headers only the libraries
# include. The installed-package test checks that no installed header includes one of them.
# aotpipe_warnings(TARGET): the project's warning flags on one of its own targets; errors with
# AOTPIPE_WERROR.
function(aotpipe_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(AOTPIPE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

function(aotpipe_add_component name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS;INTERNAL_HEADERS" ${ARGN})
  set(target aotpipe_${name})
  if(ARG_SOURCES)
    add_library(${target} ${ARG_SOURCES})
    set(scope PUBLIC)
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  add_library(aotpipe::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME aotpipe_${name})
  # Installed shared libraries (BUILD_SHARED_LIBS=ON) find each other in their own folder.
  set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${AOTPIPE_BUILD_INCLUDE_DIR}/aotpipe/${name} SYMBOLIC)
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${AOTPIPE_BUILD_INCLUDE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(ARG_PUBLIC_DEPS)
    target_link_libraries(${target} ${scope} ${ARG_PUBLIC_DEPS})
  endif()
  if(ARG_PRIVATE_DEPS)
    target_link_libraries(${target} PRIVATE ${ARG_PRIVATE_DEPS})
  endif()
  if(ARG_SOURCES)
    aotpipe_warnings(${target})
  endif()
  install(TARGETS ${target} EXPORT aotpipeTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  set(internal PATTERN "internal" EXCLUDE)
  foreach(header IN LISTS ARG_INTERNAL_HEADERS)
    list(APPEND internal PATTERN "${header}" EXCLUDE)
  endforeach()
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/aotpipe/${name}
    FILES_MATCHING PATTERN "*.h" ${internal})
endfunction()
