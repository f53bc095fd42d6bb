list(APPEND AOTPIPE_STAGES_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/merge_view_inputs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/synthetic_base.cpp
  ${CMAKE_CURRENT_LIST_DIR}/synthetic_base_runtime.cpp)
