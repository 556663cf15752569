# Fails when a Catch2 test name holds a ';'. catch_discover_tests escapes ',', '[' and ']' but splits a name at ';'
# into several ctest entries whose filters match no test, so they pass without running anything.
# Run by ctest: cmake -DBINARIES=<test binary>[;<test binary>...] -P check_test_names.cmake
foreach(binary IN LISTS BINARIES)
  # Catch2 v2 exits with the number of tests it listed, so only a crash (a text result) is a failure.
  execute_process(COMMAND ${binary} --list-test-names-only RESULT_VARIABLE rc OUTPUT_VARIABLE names
                  ERROR_VARIABLE errors)
  if(NOT rc MATCHES "^[0-9]+$" OR names STREQUAL "")
    message(FATAL_ERROR "${binary} --list-test-names-only failed (${rc}):\n${errors}")
  endif()
  # Marked, so that the names stay whole: a ';' inside a CMake string would split it as a list.
  string(REPLACE ";" "<semicolon>" names "${names}")
  string(REGEX MATCHALL "[^\n]*<semicolon>[^\n]*" bad "${names}")
  if(bad)
    list(JOIN bad "\n  " bad)
    string(REPLACE "<semicolon>" ";" bad "${bad}")
    message(FATAL_ERROR "test names in ${binary} hold a ';', which ctest cannot run (use a comma or \"and\"):\n"
                        "  ${bad}")
  endif()
endforeach()
