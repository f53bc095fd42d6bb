# cmake -P script behind the `package_consumer` test: installs the build tree into a fresh
# prefix, then configures, builds and runs tests/package/consumer against it, the way an
# outside project would (find_package(aotpipe CONFIG REQUIRED), aotpipe::aotpipe), and
# tests/package/runtime_consumer (find_package(aotpipe COMPONENTS package) without oneTBB, Boost
# or spdlog; aotpipe::package alone).
#   -DBUILD_DIR=<aotpipe build tree> -DSOURCE_DIR=<consumer sources> -DWORK_DIR=<scratch dir>
#   -DGENERATOR=<generator> -DBUILD_TYPE=<config> [-DAOTPIPE_TORCH_DIR=<site-packages>/torch]
#   [-DCXX_COMPILER=<path>]
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT ${var})
    message(FATAL_ERROR "package_test.cmake: ${var} not set")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

function(step name)
  message(STATUS "package test: ${name}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test: ${name} failed (${rc})")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

step(install ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --config ${BUILD_TYPE})
if(NOT EXISTS ${prefix}/lib/cmake/aotpipe/aotpipeConfig.cmake)
  message(FATAL_ERROR "package test: no aotpipeConfig.cmake under ${prefix}/lib/cmake/aotpipe")
endif()

# Only the headers users include are installed, and they are complete: every <aotpipe/...> an
# installed header includes is installed too, and the libraries' internal headers are not.
file(GLOB_RECURSE installed_headers RELATIVE ${prefix}/include ${prefix}/include/aotpipe/*.h)
set(dangling "")
foreach(header IN LISTS installed_headers)
  file(STRINGS ${prefix}/include/${header} includes REGEX "^#include <aotpipe/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include <([^>]+)>.*" "\\1" included "${line}")
    if(NOT EXISTS ${prefix}/include/${included})
      list(APPEND dangling "${header} includes ${included}")
    endif()
  endforeach()
endforeach()
if(dangling)
  message(FATAL_ERROR "package test: installed headers include headers that are not installed: ${dangling}")
endif()
foreach(internal aotpipe/graph/text_format.h aotpipe/runtime/aot_runtime.h aotpipe/driver/torch_thread_state.h aotpipe/cache/byte_codec.h
                 aotpipe/stages/common/aliasing.h aotpipe/stages/partition/cse.h
                 aotpipe/stages/partition/op_classes.h
                 aotpipe/tracer/internal/trace_backward.h)
  if(EXISTS ${prefix}/include/${internal})
    message(FATAL_ERROR "package test: the internal header ${internal} is installed")
  endif()
endforeach()
list(LENGTH installed_headers installed_count)
message(STATUS "package test: ${installed_count} headers installed, all includes resolved")

# The installed CLI finds its CUDA plugin where it was installed (lib/aotpipe/, docs/cli.md) and
# compiles for cuda:0 through it.
file(GLOB installed_plugin ${prefix}/lib*/aotpipe/libaotpipe_cuda_plugin.so)
if(EXISTS ${prefix}/bin/aotpipe AND installed_plugin)
  step(installed-cli-loads-its-plugin ${CMAKE_COMMAND} -E env --unset=AOTPIPE_CUDA_PLUGIN --unset=AOTPIPE_LOAD_CUDA
       ${prefix}/bin/aotpipe compile ${SOURCE_DIR}/../../../examples/mlp_layer.aotg --device cuda:0 --no-cache --no-svg)
endif()

# Nothing of the build or source tree may leak into the consumer: only the prefix is given
# (plus where torch lives, which the installed config would otherwise default to anyway).
function(consumer_configure_args source build out)
  set(args -S ${source} -B ${build} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_PREFIX_PATH=${prefix})
  if(AOTPIPE_TORCH_DIR)
    list(APPEND args -DAOTPIPE_TORCH_DIR=${AOTPIPE_TORCH_DIR})
  endif()
  if(CXX_COMPILER)
    list(APPEND args -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  endif()
  set(${out} ${args} PARENT_SCOPE)
endfunction()
consumer_configure_args(${SOURCE_DIR} ${consumer_build} configure_args)
step(configure ${CMAKE_COMMAND} ${configure_args})
step(build ${CMAKE_COMMAND} --build ${consumer_build})
step(run ${consumer_build}/consumer)
# Where the package found libtorch's CUDA library the CUDA consumer was built; it checks itself
# on a GPU and says it did nothing elsewhere.
if(EXISTS ${consumer_build}/cuda_consumer)
  step(run-cuda ${consumer_build}/cuda_consumer)
endif()

# A runtime-only consumer: find_package(aotpipe COMPONENTS package) must not look for the
# compiler's dependencies (made unfindable here), and aotpipe::package alone must link, then train
# a package that the build tree's CLI writes.
set(runtime_build ${WORK_DIR}/runtime-consumer-build)
consumer_configure_args(${SOURCE_DIR}/../runtime_consumer ${runtime_build} runtime_args)
step(configure-runtime-only ${CMAKE_COMMAND} ${runtime_args} -DCMAKE_DISABLE_FIND_PACKAGE_TBB=ON
     -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=ON)
step(build-runtime-only ${CMAKE_COMMAND} --build ${runtime_build})
if(EXISTS ${BUILD_DIR}/tools/aotpipe)
  step(write-package ${BUILD_DIR}/tools/aotpipe compile ${SOURCE_DIR}/../../../examples/pt2/tied_lm_head.pt2
       --package ${WORK_DIR}/tied_lm_head.aotpkg)
  step(run-runtime-only ${runtime_build}/package_consumer ${WORK_DIR}/tied_lm_head.aotpkg)
else()
  message(STATUS "package test: no CLI in ${BUILD_DIR} (AOTPIPE_BUILD_TOOLS off) to write a package: the runtime-only consumer was built, not run")
endif()
message(STATUS "package test: passed")
