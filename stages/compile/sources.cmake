list(APPEND AOTPIPE_STAGES_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/backend_notes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/backends.cpp
  ${CMAKE_CURRENT_LIST_DIR}/compile_stage.cpp)
