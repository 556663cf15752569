# Installs the build into a private prefix, then configures, builds and runs tests/install/consumer against it.
# Run by ctest: cmake -DBUILD_DIR=... -DSOURCE=... -DWORK=... [-DBINARIES=...] -P run_install_test.cmake
file(REMOVE_RECURSE ${WORK})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
# libcuda is loaded with dlopen, so no binary may name it in its NEEDED entries: with one, it would not even
# start on a machine without the CUDA driver.
function(expect_no_libcuda binary)
  run(readelf -d ${binary})
  string(REGEX MATCHALL "NEEDED[^\n]*" needed "${last_output}")
  if(needed MATCHES "libcuda")
    list(JOIN needed "\n" needed)
    message(FATAL_ERROR "${binary} needs libcuda, which coda loads with dlopen:\n${needed}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
# Linked with --no-as-needed (as sanitizer builds and some distributions do), every library on the consumer's
# link line becomes a NEEDED entry: a stray libcuda shows up here even where the default link drops it.
run(${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/build -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--no-as-needed)
run(${CMAKE_COMMAND} --build ${WORK}/build)
expect_no_libcuda(${WORK}/build/consumer)
run(${WORK}/build/consumer)
if(NOT last_output MATCHES "generated\n[1-9][0-9]* block epilogues")
  message(FATAL_ERROR "unexpected consumer output:\n${last_output}")
endif()
if(NOT EXISTS ${WORK}/prefix/bin/coda OR NOT EXISTS ${WORK}/prefix/share/coda/graphs/out_proj.coda)
  message(FATAL_ERROR "the CLI or the graph files were not installed")
endif()
foreach(binary ${WORK}/prefix/bin/coda ${BINARIES})
  expect_no_libcuda(${binary})
endforeach()
message(STATUS "installed coda found by find_package, linked without --as-needed and run; no binary needs libcuda")
