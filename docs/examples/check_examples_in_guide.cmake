# Fails when a ```cpp block of a Markdown page differs from the example file it says it shows, or
# when a ```cpp block says no file, so the user guide's code cannot drift from the programs that
# docs/examples/ builds and runs. A shown block is marked by the line just before it:
#   <!-- example: docs/examples/custom_compiler.cpp -->
#   ```cpp
#   ...the whole file...
#   ```
# Run: cmake -DPAGE=<page.md> -DROOT=<repository root> [-DWORK_DIR=<dir for drifted copies>] -P <this file>
cmake_minimum_required(VERSION 3.25)  # policies: while(TRUE), if() on constants
if(NOT PAGE OR NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DPAGE=<page.md> -DROOT=<repository root> -P check_examples_in_guide.cmake")
endif()
if(NOT WORK_DIR)
  set(WORK_DIR ${CMAKE_CURRENT_BINARY_DIR})
endif()
file(READ "${PAGE}" rest)

set(fence "```cpp\n")
string(LENGTH "${fence}" fence_length)
set(line 1)         # line number in PAGE of the start of `rest`
set(checked 0)
set(problems "")
while(TRUE)
  string(FIND "${rest}" "${fence}" start)
  if(start EQUAL -1)
    break()
  endif()
  string(SUBSTRING "${rest}" 0 ${start} before)
  string(REGEX MATCHALL "\n" newlines "${before}")
  list(LENGTH newlines n)
  math(EXPR fence_line "${line} + ${n}")
  math(EXPR body_start "${start} + ${fence_length}")
  string(SUBSTRING "${rest}" ${body_start} -1 rest)
  math(EXPR line "${fence_line} + 1")
  # The block ends at the first line that is a closing fence.
  string(FIND "${rest}" "\n```" end)
  if(end EQUAL -1)
    list(APPEND problems "${PAGE}:${fence_line}: a ```cpp block is never closed")
    break()
  endif()
  math(EXPR end "${end} + 1")  # keep the block's last newline
  string(SUBSTRING "${rest}" 0 ${end} block)
  string(SUBSTRING "${rest}" ${end} -1 rest)
  string(REGEX MATCHALL "\n" newlines "${block}")
  list(LENGTH newlines n)
  math(EXPR line "${line} + ${n}")

  string(REGEX MATCH "<!-- example: ([^ \n]+) -->[ \t]*\n$" marker "${before}")
  if(NOT marker)
    list(APPEND problems "${PAGE}:${fence_line}: a ```cpp block without an `<!-- example: docs/examples/FILE.cpp -->` line before it: every C++ example must be a file under docs/examples/ that CI builds and runs")
    continue()
  endif()
  set(example "${CMAKE_MATCH_1}")
  if(NOT EXISTS "${ROOT}/${example}")
    list(APPEND problems "${PAGE}:${fence_line}: the block shows ${example}, which does not exist")
    continue()
  endif()
  file(READ "${ROOT}/${example}" expected)
  math(EXPR checked "${checked} + 1")
  if(NOT block STREQUAL expected)
    get_filename_component(example_name "${example}" NAME)
    set(shown "${WORK_DIR}/as_shown_in_guide_${example_name}")
    file(WRITE "${shown}" "${block}")
    list(APPEND problems "${PAGE}:${fence_line}: the block differs from ${example}: copy the file into the page (diff ${shown} ${ROOT}/${example})")
  endif()
endwhile()

if(checked EQUAL 0 AND NOT problems)
  list(APPEND problems "${PAGE}: no ```cpp block marked `<!-- example: ... -->`: nothing was checked")
endif()
if(problems)
  list(LENGTH problems count)
  string(REPLACE ";" "\n" problems "${problems}")
  message(NOTICE "${problems}")  # unwrapped, one problem a line
  message(FATAL_ERROR "${count} problem(s) with the C++ examples of ${PAGE}")
endif()
message(STATUS "${PAGE}: ${checked} C++ examples match their files")
