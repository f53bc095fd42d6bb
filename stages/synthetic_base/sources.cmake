list(APPEND AOTPIPE_STAGES_SOURCES ${CMAKE_CURRENT_LIST_DIR}/synthetic_base.cpp)
# merge_view_inputs runs at every call too (built by aotpipe::runtime).
list(APPEND AOTPIPE_RUNTIME_SOURCES ${CMAKE_CURRENT_LIST_DIR}/merge_view_inputs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/synthetic_base_runtime.cpp)
