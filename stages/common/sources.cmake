list(APPEND AOTPIPE_STAGES_SOURCES ${CMAKE_CURRENT_LIST_DIR}/aliasing.cpp ${CMAKE_CURRENT_LIST_DIR}/plan_codec.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_wrapper.cpp
  ${CMAKE_CURRENT_LIST_DIR}/view_replay.cpp)
