# One precompiled header of libtorch (+ GoogleTest) that the test, example and benchmark programs
# share: parsing <torch/torch.h> costs 20-40 s per translation unit, and most test files include
# it or ATen. The header is compiled once per set of compile options (about 730 MB each with GCC:
# disk, not only time, decides how many there are) and every target in the folders given to
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

# Compiles TARGET as code for an executable (-fPIE): GCC refuses a precompiled header built with
# other code-generation flags, so executables and the static libraries linked into them share
# one header only if both are compiled alike.
function(_aotpipe_compile_for_executables target)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(${target} PRIVATE ${CMAKE_CXX_COMPILE_OPTIONS_PIE})
endfunction()

# The object library that compiles the shared header once, with -fPIE and the OPTIONS of the
# targets that reuse it.
function(_aotpipe_torch_pch_host name)
  if(TARGET ${name})
    return()
  endif()
  set(options ${ARGN})
  file(WRITE ${CMAKE_BINARY_DIR}/${name}.cpp "// the translation unit of the shared precompiled header\n")
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${CMAKE_BINARY_DIR}/${name}.cpp)
  _aotpipe_compile_for_executables(${name})
  target_compile_options(${name} PRIVATE ${options})
  target_link_libraries(${name} PRIVATE aotpipe::torch)
  target_precompile_headers(${name} PRIVATE <torch/torch.h>)
  if(TARGET GTest::gmock)
    target_link_libraries(${name} PRIVATE GTest::gtest GTest::gmock)
    target_precompile_headers(${name} PRIVATE <gtest/gtest.h> <gmock/gmock.h>)
  endif()
endfunction()

# aotpipe_reuse_torch_pch(DIR... EXCLUDE DIR... [OPTIONS FLAG... HOST NAME]): every executable
# and static library defined below the DIRs, except below the EXCLUDE ones (programs that do not
# link libtorch), reuses the shared header. Static libraries among them are compiled as code for
# executables (-fPIE), so they must not be linked into shared libraries. OPTIONS are compile
# options given to those targets and to the header's own host, named after HOST: a header is
# reusable only by targets compiled with the options it was compiled with.
function(aotpipe_reuse_torch_pch)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "HOST" "EXCLUDE;OPTIONS")
  set(excluded)
  foreach(dir IN LISTS arg_EXCLUDE)
    _aotpipe_targets_below(${dir} below)
    list(APPEND excluded ${below})
  endforeach()
  set(reusing)
  foreach(dir IN LISTS arg_UNPARSED_ARGUMENTS)
    _aotpipe_targets_below(${dir} targets)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(NOT target IN_LIST excluded AND type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$")
        list(APPEND reusing ${target})
        target_compile_options(${target} PRIVATE ${arg_OPTIONS})
      endif()
    endforeach()
  endforeach()
  if(NOT AOTPIPE_PRECOMPILED_HEADERS OR NOT AOTPIPE_WITH_TORCH)
    return()
  endif()
  set(suffix "")
  if(arg_HOST)
    set(suffix "_${arg_HOST}")
  endif()
  _aotpipe_torch_pch_host(aotpipe_torch_pch${suffix} ${arg_OPTIONS})
  foreach(target IN LISTS reusing)
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "EXECUTABLE")
      _aotpipe_compile_for_executables(${target})
    endif()
    target_precompile_headers(${target} REUSE_FROM aotpipe_torch_pch${suffix})
    # The header's include paths and macros: GCC rejects the precompiled form where a macro the
    # header saw differs (GTEST_HAS_PTHREAD, for targets that do not link GoogleTest) and, if
    # it does, parses the header instead.
    if(TARGET GTest::gmock)
      target_compile_options(${target} PRIVATE $<TARGET_PROPERTY:GTest::gtest,INTERFACE_COMPILE_OPTIONS>)
      target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:GTest::gmock,INTERFACE_INCLUDE_DIRECTORIES>
                                                 $<TARGET_PROPERTY:GTest::gtest,INTERFACE_INCLUDE_DIRECTORIES>)
    endif()
  endforeach()
endfunction()
