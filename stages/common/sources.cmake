# The runtime halves (built into aotpipe::runtime, runtime/CMakeLists.txt): the aliasing helpers,
# the plans' codecs and runtime wrappers, view replay.
list(APPEND AOTPIPE_RUNTIME_SOURCES ${CMAKE_CURRENT_LIST_DIR}/aliasing.cpp ${CMAKE_CURRENT_LIST_DIR}/plan_codec.cpp
  ${CMAKE_CURRENT_LIST_DIR}/runtime_wrapper.cpp ${CMAKE_CURRENT_LIST_DIR}/view_replay.cpp)
