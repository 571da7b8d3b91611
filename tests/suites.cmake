# Run at build time (tests/CMakeLists.txt, unit_tests): lists the tests of the GoogleTest
# executable EXE and writes OUT, one CTest test per test suite (TARGET:Suite, running
# --gtest_filter=Suite.*) with TIMEOUT seconds and SWARMRT_TEST_DATA=DATA. A suite's tests share
# one process: each process of a test binary linked to LibTorch spends about a second of CPU
# loading its libraries, which a test per process paid some 350 times in a suite run. The suites
# in ALONE (';'-separated) keep a process per test (TARGET:Suite.Test): their tests use
# process-wide state (the frame links' registry) that an earlier test of the process would leave.
# OPENBLAS_CORETYPE is cleared: the BlasKernels tests check the kernels this process chooses
# for itself (model/threads.hpp), whatever the shell that runs ctest asked for.
cmake_minimum_required(VERSION 3.16)  # IN_LIST
execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE rc
                TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}): ${listing}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(content "")
set(suite "")
function(emit name filter)
  string(APPEND content
    "add_test([==[${name}]==] [==[${EXE}]==] [==[--gtest_filter=${filter}]==])\n"
    "set_tests_properties([==[${name}]==] PROPERTIES TIMEOUT ${TIMEOUT} "
    "ENVIRONMENT [==[SWARMRT_TEST_DATA=${DATA}]==] "
    "ENVIRONMENT_MODIFICATION [==[OPENBLAS_CORETYPE=unset:]==])\n")
  set(content "${content}" PARENT_SCOPE)
endfunction()
foreach(line IN LISTS lines)
  # A suite's line is its name and a dot at the start of the line (a typed or parameterized
  # suite's comment after it); its tests follow, indented two spaces.
  if(line MATCHES "^([^ #]+)\\.( .*)?$")
    set(suite "${CMAKE_MATCH_1}")
    if(NOT suite IN_LIST ALONE)
      emit("${TARGET}:${suite}" "${suite}.*")
    endif()
  elseif(suite IN_LIST ALONE AND line MATCHES "^  ([^ ]+)")
    emit("${TARGET}:${suite}.${CMAKE_MATCH_1}" "${suite}.${CMAKE_MATCH_1}")
  endif()
endforeach()
file(WRITE "${OUT}" "${content}")
