list(APPEND AOTPIPE_STAGES_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/view_and_mutation_meta.cpp
  ${CMAKE_CURRENT_LIST_DIR}/collect_metadata.cpp
  ${CMAKE_CURRENT_LIST_DIR}/metadata_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/metadata_stage.cpp)
