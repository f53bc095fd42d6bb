list(APPEND AOTPIPE_STAGES_SOURCES ${CMAKE_CURRENT_LIST_DIR}/dedupe.cpp)
list(APPEND AOTPIPE_RUNTIME_SOURCES ${CMAKE_CURRENT_LIST_DIR}/dedupe_runtime.cpp)  # built by aotpipe::runtime
