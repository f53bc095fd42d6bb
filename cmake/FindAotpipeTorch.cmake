# Finds libtorch inside an installed `torch` Python wheel and defines the imported target
# aotpipe::torch (headers, libtorch, libtorch_cpu, libc10, libc10_cuda where present).
#
# Why not TorchConfig.cmake: the wheel's config looks for a CUDA toolkit at configure time
# (and fails where none is installed, e.g. a machine with only the wheel's own CUDA runtime).
# Linking the wheel's libraries directly needs no toolkit: they carry their own RUNPATHs to
# the nvidia-* wheels. libtorch.so pulls libtorch_cuda.so so CUDA kernels register when a
# GPU is present.
#
# Looked up, in order: -DAOTPIPE_TORCH_DIR=<site-packages>/torch, $AOTPIPE_TORCH_DIR,
# then `import torch` with $AOTPIPE_PYTHON, else python3.
#
# AOTPIPE_TORCH_CUDA: AUTO (default) links libc10_cuda and libtorch's CUDA kernels where the
# wheel has them; ON requires them; OFF links only libtorch_cpu and libc10: CPU tensors only, and
# none of libtorch_cuda, cuBLAS, cuDNN, NCCL... is loaded. The Conan recipe's with_cuda sets it.
if(TARGET aotpipe::torch)
  set(AotpipeTorch_FOUND TRUE)
  return()
endif()

# True for a program that links libtorch's CUDA part, false for one with the target property
# AOTPIPE_LOADS_CUDA_ON_DEMAND (the aotpipe CLI, which loads it as a plugin): a generator
# expression, evaluated on the program being linked.
set(AOTPIPE_LINKS_CUDA "$<NOT:$<BOOL:$<TARGET_PROPERTY:AOTPIPE_LOADS_CUDA_ON_DEMAND>>>")

if(NOT AOTPIPE_TORCH_DIR AND DEFINED ENV{AOTPIPE_TORCH_DIR})
  set(AOTPIPE_TORCH_DIR $ENV{AOTPIPE_TORCH_DIR})
endif()
if(NOT AOTPIPE_TORCH_DIR)
  set(_aotpipe_python python3)
  if(DEFINED ENV{AOTPIPE_PYTHON})
    set(_aotpipe_python $ENV{AOTPIPE_PYTHON})
  endif()
  execute_process(
    COMMAND ${_aotpipe_python} -c "import os, torch; print(os.path.dirname(torch.__file__))"
    OUTPUT_VARIABLE _aotpipe_torch_dir OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _aotpipe_rc ERROR_QUIET)
  if(_aotpipe_rc EQUAL 0)
    set(AOTPIPE_TORCH_DIR ${_aotpipe_torch_dir})
  endif()
endif()
set(AOTPIPE_TORCH_DIR "${AOTPIPE_TORCH_DIR}" CACHE PATH "The installed torch package (…/site-packages/torch)")

find_path(AotpipeTorch_INCLUDE_DIR ATen/ATen.h PATHS ${AOTPIPE_TORCH_DIR}/include NO_DEFAULT_PATH)
foreach(_lib torch torch_cpu c10)
  find_library(AotpipeTorch_${_lib}_LIBRARY ${_lib} PATHS ${AOTPIPE_TORCH_DIR}/lib NO_DEFAULT_PATH)
endforeach()
find_library(AotpipeTorch_c10_cuda_LIBRARY c10_cuda PATHS ${AOTPIPE_TORCH_DIR}/lib NO_DEFAULT_PATH)

if(NOT DEFINED AOTPIPE_TORCH_CUDA OR AOTPIPE_TORCH_CUDA STREQUAL "" OR AOTPIPE_TORCH_CUDA STREQUAL "AUTO")
  set(_aotpipe_torch_cuda AUTO)
elseif(AOTPIPE_TORCH_CUDA)
  set(_aotpipe_torch_cuda ON)
else()
  set(_aotpipe_torch_cuda OFF)
endif()
set(_aotpipe_torch_required AotpipeTorch_INCLUDE_DIR AotpipeTorch_torch_LIBRARY AotpipeTorch_torch_cpu_LIBRARY
                            AotpipeTorch_c10_LIBRARY)
if(_aotpipe_torch_cuda STREQUAL "ON")
  list(APPEND _aotpipe_torch_required AotpipeTorch_c10_cuda_LIBRARY)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(AotpipeTorch
  REQUIRED_VARS ${_aotpipe_torch_required}
  FAIL_MESSAGE "torch not found: run scripts/setup, or pass -DAOTPIPE_TORCH_DIR=<site-packages>/torch")

if(AotpipeTorch_FOUND)
  # The wheel's include/ also carries its own {fmt} (v12), which would shadow the system {fmt}
  # that spdlog is built against and mix two ABIs. Expose the wheel's headers through a folder
  # of links that leaves fmt/ out.
  set(_aotpipe_torch_inc ${CMAKE_BINARY_DIR}/aotpipe-torch-include)
  file(GLOB _aotpipe_entries RELATIVE ${AotpipeTorch_INCLUDE_DIR} ${AotpipeTorch_INCLUDE_DIR}/*)
  file(MAKE_DIRECTORY ${_aotpipe_torch_inc})
  foreach(_entry IN LISTS _aotpipe_entries)
    if(NOT _entry STREQUAL "fmt" AND NOT EXISTS ${_aotpipe_torch_inc}/${_entry})
      file(CREATE_LINK ${AotpipeTorch_INCLUDE_DIR}/${_entry} ${_aotpipe_torch_inc}/${_entry} SYMBOLIC)
    endif()
  endforeach()
  add_library(aotpipe::torch INTERFACE IMPORTED)
  # SYSTEM: libtorch's headers are not ours to warn about.
  set_target_properties(aotpipe::torch PROPERTIES
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES
      "${_aotpipe_torch_inc};${_aotpipe_torch_inc}/torch/csrc/api/include"
    INTERFACE_INCLUDE_DIRECTORIES
      "${_aotpipe_torch_inc};${_aotpipe_torch_inc}/torch/csrc/api/include")
  if(_aotpipe_torch_cuda STREQUAL "OFF")
    target_link_libraries(aotpipe::torch INTERFACE ${AotpipeTorch_torch_cpu_LIBRARY} ${AotpipeTorch_c10_LIBRARY})
  else()
    set(_aotpipe_torch_libs ${AotpipeTorch_torch_LIBRARY})
    if(AotpipeTorch_c10_cuda_LIBRARY)
      list(APPEND _aotpipe_torch_libs ${AotpipeTorch_c10_cuda_LIBRARY})
    endif()
    # --no-as-needed: libtorch.so has no symbols we call, but loading it registers the CUDA kernels.
    # A program with the property AOTPIPE_LOADS_CUDA_ON_DEMAND (the aotpipe CLI) links only
    # libtorch_cpu and libc10, and loads the rest itself when a command names CUDA.
    target_link_libraries(aotpipe::torch INTERFACE ${AotpipeTorch_torch_cpu_LIBRARY} ${AotpipeTorch_c10_LIBRARY}
      "$<${AOTPIPE_LINKS_CUDA}:-Wl,--no-as-needed;${_aotpipe_torch_libs};-Wl,--as-needed>")
  endif()
  target_link_options(aotpipe::torch INTERFACE "-Wl,-rpath,${AOTPIPE_TORCH_DIR}/lib")

  # aotpipe::torch_cuda: for code that uses libtorch's CUDA API itself (c10::cuda streams,
  # at::cuda::CUDAGraph): libtorch_cuda, libc10_cuda and the CUDA runtime headers the wheel
  # ships (nvidia/cu*/include), else a toolkit's. Defined only where all are found.
  find_library(AotpipeTorch_torch_cuda_LIBRARY torch_cuda PATHS ${AOTPIPE_TORCH_DIR}/lib NO_DEFAULT_PATH)
  file(GLOB _aotpipe_cuda_inc_hints ${AOTPIPE_TORCH_DIR}/../nvidia/cu*/include ${AOTPIPE_TORCH_DIR}/../nvidia/cuda_runtime/include)
  find_path(AotpipeTorch_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${_aotpipe_cuda_inc_hints} PATHS /usr/local/cuda/include)
  # The CUDA runtime libtorch_cuda itself loads (the wheel's, found beside those headers).
  get_filename_component(_aotpipe_cuda_root "${AotpipeTorch_CUDA_INCLUDE_DIR}" DIRECTORY)
  find_library(AotpipeTorch_cudart_LIBRARY NAMES cudart libcudart.so.13 libcudart.so.12
               PATHS ${_aotpipe_cuda_root}/lib ${_aotpipe_cuda_root}/lib64 NO_DEFAULT_PATH)
  if(NOT _aotpipe_torch_cuda STREQUAL "OFF" AND AotpipeTorch_torch_cuda_LIBRARY AND AotpipeTorch_c10_cuda_LIBRARY
     AND AotpipeTorch_CUDA_INCLUDE_DIR AND AotpipeTorch_cudart_LIBRARY)
    # aotpipe::cuda_runtime: the CUDA runtime API alone (libcudart, which libtorch_cpu loads anyway).
    add_library(aotpipe::cuda_runtime INTERFACE IMPORTED)
    set_target_properties(aotpipe::cuda_runtime PROPERTIES
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${AotpipeTorch_CUDA_INCLUDE_DIR}"
      INTERFACE_INCLUDE_DIRECTORIES "${AotpipeTorch_CUDA_INCLUDE_DIR}")
    target_link_libraries(aotpipe::cuda_runtime INTERFACE ${AotpipeTorch_cudart_LIBRARY})
    add_library(aotpipe::torch_cuda INTERFACE IMPORTED)
    target_link_libraries(aotpipe::torch_cuda INTERFACE aotpipe::torch aotpipe::cuda_runtime
      "-Wl,--no-as-needed" ${AotpipeTorch_torch_cuda_LIBRARY} ${AotpipeTorch_c10_cuda_LIBRARY} "-Wl,--as-needed")
  endif()
endif()

# The Python that has this torch: differential tests run PyTorch as the oracle with it.
if(NOT AOTPIPE_PYTHON_FOR_TESTS)
  if(DEFINED ENV{AOTPIPE_PYTHON})
    set(AOTPIPE_PYTHON_FOR_TESTS $ENV{AOTPIPE_PYTHON})
  else()
    set(AOTPIPE_PYTHON_FOR_TESTS python3)
  endif()
endif()
set(AOTPIPE_PYTHON_FOR_TESTS "${AOTPIPE_PYTHON_FOR_TESTS}" CACHE STRING "Python with torch, for differential tests")
