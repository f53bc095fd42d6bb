list(APPEND AOTPIPE_STAGES_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/collect_metadata.cpp
  ${CMAKE_CURRENT_LIST_DIR}/metadata_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/metadata_stage.cpp)
# The metadata's own methods: a stored artifact carries it (built by aotpipe::runtime).
list(APPEND AOTPIPE_RUNTIME_SOURCES ${CMAKE_CURRENT_LIST_DIR}/view_and_mutation_meta.cpp)
