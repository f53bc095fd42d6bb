# One precompiled header of libtorch (+ GoogleTest) that the test, example and benchmark programs
# share: parsing <torch/torch.h> costs 20-40 s per translation unit, and most test files include
# it or ATen. The header is compiled once per kind of target (aotpipe_torch_pch_exe for programs,
# aotpipe_torch_pch_lib for static libraries) and every target in the folders given to
# aotpipe_reuse_torch_pch() reuses it. The libraries do not use it: their sources must
# keep compiling from their own includes (the Conan package builds them without it).
option(AOTPIPE_PRECOMPILED_HEADERS "Share one precompiled libtorch header among tests, examples and benchmarks" ON)

# The targets defined in DIR and below it.
function(_aotpipe_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _aotpipe_targets_below(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The object library that compiles the shared header once, with -fPIE (for executables) or -fPIC.
function(_aotpipe_torch_pch_host name pie)
  if(TARGET ${name})
    return()
  endif()
  file(WRITE ${CMAKE_BINARY_DIR}/${name}.cpp "// the translation unit of the shared precompiled header\n")
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${CMAKE_BINARY_DIR}/${name}.cpp)
  if(pie)
    set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${name} PRIVATE ${CMAKE_CXX_COMPILE_OPTIONS_PIE})
  endif()
  target_link_libraries(${name} PRIVATE aotpipe::torch)
  target_precompile_headers(${name} PRIVATE <torch/torch.h>)
  if(TARGET GTest::gmock)
    target_link_libraries(${name} PRIVATE GTest::gtest GTest::gmock)
    target_precompile_headers(${name} PRIVATE <gtest/gtest.h> <gmock/gmock.h>)
  endif()
endfunction()

# aotpipe_reuse_torch_pch(DIR... EXCLUDE DIR...): every executable and static library defined
# below the DIRs, except below the EXCLUDE ones (programs that do not link libtorch).
function(aotpipe_reuse_torch_pch)
  if(NOT AOTPIPE_PRECOMPILED_HEADERS OR NOT AOTPIPE_WITH_TORCH)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "" "EXCLUDE")
  # GCC refuses a precompiled header built with other code-generation flags: executables compile
  # with -fPIE and libraries with -fPIC, so each kind gets its own host (built only when used).
  _aotpipe_torch_pch_host(aotpipe_torch_pch_lib OFF)
  _aotpipe_torch_pch_host(aotpipe_torch_pch_exe ON)
  set(excluded)
  foreach(dir IN LISTS arg_EXCLUDE)
    _aotpipe_targets_below(${dir} below)
    list(APPEND excluded ${below})
  endforeach()
  foreach(dir IN LISTS arg_UNPARSED_ARGUMENTS)
    _aotpipe_targets_below(${dir} targets)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(target IN_LIST excluded OR NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$")
        continue()
      endif()
      if(type STREQUAL "EXECUTABLE")
        target_precompile_headers(${target} REUSE_FROM aotpipe_torch_pch_exe)
      else()
        target_precompile_headers(${target} REUSE_FROM aotpipe_torch_pch_lib)
      endif()
      # The header's include paths and macros: GCC rejects the precompiled form where a macro the
      # header saw differs (GTEST_HAS_PTHREAD, for targets that do not link GoogleTest) and, if
      # it does, parses the header instead.
      if(TARGET GTest::gmock)
        target_compile_options(${target} PRIVATE $<TARGET_PROPERTY:GTest::gtest,INTERFACE_COMPILE_OPTIONS>)
        target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:GTest::gmock,INTERFACE_INCLUDE_DIRECTORIES>
                                                   $<TARGET_PROPERTY:GTest::gtest,INTERFACE_INCLUDE_DIRECTORIES>)
      endif()
    endforeach()
  endforeach()
endfunction()
