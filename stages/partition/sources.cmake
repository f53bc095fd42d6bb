list(APPEND AOTPIPE_STAGES_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/op_classes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/max_flow.cpp
  ${CMAKE_CURRENT_LIST_DIR}/joint_view.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cse.cpp
  ${CMAKE_CURRENT_LIST_DIR}/extract.cpp
  ${CMAKE_CURRENT_LIST_DIR}/default_partition.cpp
  ${CMAKE_CURRENT_LIST_DIR}/min_cut_partition.cpp
  ${CMAKE_CURRENT_LIST_DIR}/partition_stage.cpp)
