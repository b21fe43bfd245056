# ctest install.tool: installs this build's tool component (and fuzz, where the build has the
# harnesses) into a scratch prefix, links the installed mlacheck into a folder put first on PATH (as
# scripts/main.sh does), and runs it by its bare name from outside the source tree: `mlacheck list`,
# a regression case from the installed corpus (PASS on @ref, FAIL on its seeded variant) and, with
# the harnesses, a short fuzz run that must find them beside the installed tool.
# Arguments (-D): BUILD_DIR, SOURCE_DIR, WORK_DIR, FUZZ (ON or OFF).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/path)
set(prefix ${WORK_DIR}/prefix)

# Runs a command in WORK_DIR with WORK_DIR/path first on PATH; fails unless it exits with `expect`
# and its output matches `pattern`.
function(step expect pattern)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "PATH=${WORK_DIR}/path:$ENV{PATH}" ${ARGN}
                  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(JOIN " " command ${ARGN})
  if(NOT rc STREQUAL "${expect}" OR NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "install.tool: `${command}` exited ${rc} (want ${expect}), output (want /${pattern}/):\n${out}")
  endif()
  message(STATUS "install.tool: `${command}` exited ${rc} as it should")
endfunction()

set(components tool)
if(FUZZ)
  list(APPEND components fuzz)
endif()
foreach(c ${components})
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component ${c}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install.tool: cmake --install --component ${c} failed (${rc}):\n${out}")
  endif()
endforeach()

# The corpus went with the tool, every regression of the source tree, without the CMake file.
file(GLOB source_cases ${SOURCE_DIR}/corpus/regressions/*.case)
file(GLOB installed_cases ${prefix}/share/mlacheck/corpus/regressions/*.case)
list(LENGTH source_cases want)
list(LENGTH installed_cases got)
if(NOT got EQUAL want OR want EQUAL 0 OR EXISTS ${prefix}/share/mlacheck/corpus/CMakeLists.txt)
  message(FATAL_ERROR "install.tool: ${got} regression cases installed under ${prefix}/share/mlacheck/corpus, "
                      "the source tree has ${want} (and the corpus's CMakeLists.txt must stay behind)")
endif()
# Only the tool's files: no libraries or headers of the development component.
if(EXISTS ${prefix}/lib OR EXISTS ${prefix}/include)
  message(FATAL_ERROR "install.tool: --component tool installed ${prefix}/lib or ${prefix}/include")
endif()

# The Python package went with it, importable from share/mlacheck/python with no source tree.
if(NOT EXISTS ${prefix}/share/mlacheck/python/mlacheck/__init__.py OR NOT EXISTS ${prefix}/share/mlacheck/python/mlacheck/_worker.py)
  message(FATAL_ERROR "install.tool: the Python package is not under ${prefix}/share/mlacheck/python/mlacheck")
endif()
# With the guard's library beside it (mlacheck.guard() loads it from there).
if(NOT EXISTS ${prefix}/share/mlacheck/python/mlacheck/libmlacheck_guard.so)
  message(FATAL_ERROR "install.tool: no libmlacheck_guard.so beside the Python package in ${prefix}/share/mlacheck/python/mlacheck")
endif()
file(CREATE_LINK ${prefix}/bin/mlacheck ${WORK_DIR}/path/mlacheck SYMBOLIC)
find_program(python3 NAMES python3)
if(python3)
  step(0 "topk_decode.rows_admissible" ${CMAKE_COMMAND} -E env PYTHONPATH=${prefix}/share/mlacheck/python
       ${python3} -c "print(__import__('mlacheck').properties('topk_decode'))")
  # The guard finds its library beside the installed package, with no variable set.
  step(0 "guard library loaded" ${CMAKE_COMMAND} -E env --unset=MLACHECK_GUARD_LIB PYTHONPATH=${prefix}/share/mlacheck/python
       ${python3} -c "print('guard library loaded' if __import__('mlacheck') and __import__('sys').modules['mlacheck.guard']._library() else 'no')")
endif()
set(case ${prefix}/share/mlacheck/corpus/regressions/R1-topk-decode-view-past-num-decode-tokens.case)
step(0 "host" mlacheck list)
step(0 "PASS" mlacheck repro ${case} --backend host)
step(1 "FAIL" mlacheck repro ${case} --backend host --impl indexer_decode_step@R1)
# The example plugins went with it (this build makes them), and the installed tool runs them: the
# buggy twin's short-row fill (-1 on to the row stride) fails its first case.
set(plugins ${prefix}/share/mlacheck/plugins)
if(NOT EXISTS ${plugins}/libmlacheck_example_plugin.so OR NOT EXISTS ${plugins}/libmlacheck_example_plugin_buggy.so)
  message(FATAL_ERROR "install.tool: the example plugin and its buggy twin are not under ${plugins}")
endif()
step(0 "topk_decode@example " mlacheck list --plugin ${plugins}/libmlacheck_example_plugin.so)
step(1 "topk_decode@example_buggy +FAIL" mlacheck check --plugin ${plugins}/libmlacheck_example_plugin_buggy.so
     --impl topk_decode@example_buggy --budget 20 --fail-fast --save ${WORK_DIR}/cases)
if(FUZZ)
  # The harness is found through the link: <installed bin>/../fuzz/topk_to_global_fuzzer.
  step(0 "prefix/fuzz/topk_to_global_fuzzer" mlacheck fuzz --target topk_to_global --runs 200 --out ${WORK_DIR}/fuzz)
endif()
message(STATUS "install.tool: the installed mlacheck runs from the PATH")
