# Helpers that keep the module graph honest and register tests.
#
# Every module (gpu, orchestration, actors, tools) is one library target. Its headers are reached
# as "<module>/<path>" through an include root that holds only that module (a symlink under
# build/include/<module>/), so a target sees the headers of exactly the modules it links: an
# include across a forbidden edge fails to compile. tests/unit/layering checks the system headers
# (CUDA, CAF, ZeroMQ) that no include path can hide.

function(tandem_module_include_root module)
  set(root "${CMAKE_BINARY_DIR}/include/${module}")
  file(MAKE_DIRECTORY "${root}")
  file(CREATE_LINK "${CMAKE_SOURCE_DIR}/${module}" "${root}/${module}" SYMBOLIC)
  set(TANDEM_INCLUDE_ROOT_${module} "${root}" PARENT_SCOPE)
endfunction()

# tandem_add_boost_tests(<exe> SOURCES ... LIBS ... [LABELS ...])
# Builds one Boost.Test executable and registers each top-level BOOST_AUTO_TEST_SUITE found in its
# sources as its own CTest entry, so CTest's summary counts suites.
function(tandem_add_boost_tests exe)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${exe} ${T_SOURCES} ${CMAKE_SOURCE_DIR}/tests/boost_main.cpp)
  target_link_libraries(${exe} PRIVATE ${T_LIBS} Boost::unit_test_framework)
  target_include_directories(${exe} PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
  target_compile_definitions(${exe} PRIVATE
    TANDEM_SOURCE_DIR="${CMAKE_SOURCE_DIR}" TANDEM_BINARY_DIR="${CMAKE_BINARY_DIR}")
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set(suites "")
  foreach(src ${T_SOURCES})
    file(STRINGS "${src}" lines REGEX "^BOOST_(AUTO|FIXTURE)_TEST_SUITE\\(")
    foreach(line ${lines})
      string(REGEX REPLACE "^BOOST_(AUTO|FIXTURE)_TEST_SUITE\\(([A-Za-z0-9_]+).*" "\\2" suite "${line}")
      list(APPEND suites ${suite})
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES suites)
  if(NOT suites)
    message(FATAL_ERROR "${exe}: no BOOST_AUTO_TEST_SUITE found in its sources")
  endif()
  foreach(suite ${suites})
    add_test(NAME ${exe}.${suite}
      COMMAND ${exe} --run_test=${suite} --color_output=no --report_level=short)
    set_tests_properties(${exe}.${suite} PROPERTIES TIMEOUT ${T_TIMEOUT}
      WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}")
    if(T_LABELS)
      set_tests_properties(${exe}.${suite} PROPERTIES LABELS "${T_LABELS}")
    endif()
  endforeach()
endfunction()
