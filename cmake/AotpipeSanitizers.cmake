# Sanitizer builds, applied to every target of the project. ASan and TSan cannot be combined.
if(AOTPIPE_SANITIZE_ADDRESS AND AOTPIPE_SANITIZE_THREAD)
  message(FATAL_ERROR "AOTPIPE_SANITIZE_ADDRESS and AOTPIPE_SANITIZE_THREAD are exclusive")
endif()
if(AOTPIPE_SANITIZE_ADDRESS)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(AOTPIPE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "AOTPIPE_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(AOTPIPE_SANITIZE_ADDRESS OR AOTPIPE_SANITIZE_THREAD)
    message(FATAL_ERROR "AOTPIPE_FUZZ brings its own sanitizers (ASan + UBSan)")
  endif()
  # Coverage feedback for libFuzzer in every target; the fuzz programs add -fsanitize=fuzzer
  # (its main) at their link. UBSan's `function` check is left out: clang 14 cannot emit it
  # with coverage in coroutine frames ("Cannot represent a difference across sections",
  # pipeline/asio_bridge.cpp), and it needs every caller instrumented, which libtorch is not.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=function
                      -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
if(AOTPIPE_SANITIZE_THREAD)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# ThreadSanitizer with libtorch (build-tsan-torch, run by scripts/test-tsan-torch): our code is
# instrumented, the libtorch wheel is not (docs/libtorch-2.11.md, "ThreadSanitizer with
# libtorch"). aotpipe_tsan_torch_test(NAME COMMAND...) registers a ctest labelled `tsan-torch`
# that runs with what makes such a run sound: TSan stops at the first report, the suppressions
# of tests/tsan_torch.supp (each a libtorch-internal false positive), and OMP_NUM_THREADS=1
# because libgomp's fork/join barriers are invisible to TSan. A no-op in other configurations.
set(AOTPIPE_TSAN_TORCH_OPTIONS
  "halt_on_error=1:second_deadlock_stack=1:suppressions=${PROJECT_SOURCE_DIR}/tests/tsan_torch.supp")
function(aotpipe_tsan_torch_test name)
  if(NOT (AOTPIPE_SANITIZE_THREAD AND AOTPIPE_WITH_TORCH))
    return()
  endif()
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS tsan-torch
    ENVIRONMENT "TSAN_OPTIONS=${AOTPIPE_TSAN_TORCH_OPTIONS};OMP_NUM_THREADS=1")
endfunction()
