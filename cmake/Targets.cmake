# Helpers that give every test, GPU test, HIP check and fuzzer the same shape and ctest labels.
#
# Labels: unit, property, corpus, mutants, fuzz, gpu (needs a GPU; skipped without one), hip.

include(GoogleTest)

set(MLACHECK_WARNINGS -Wall -Wextra)
set(MLACHECK_PROPERTY_CASES 1000 CACHE STRING "RapidCheck cases per property in ctest runs")
# Compile options of the test binaries' own sources (tests/**/*_test.cpp), after the build type's:
# scripts/main.sh sets -O0 for the build it runs its stages in (the default preset). Those files
# hold RapidCheck's and GoogleTest's templates and the
# properties' calls, not the work a case does (the kernels, oracles and checks are in the -O2
# libraries they link), and at -O0 they compile about 3x faster (decode_metadata_test.cpp under
# ASan: 25.9 s at -O2 -g, 9.0 s at -O0; docs/building.md).
set(MLACHECK_TEST_COMPILE_OPTIONS "" CACHE STRING "Compile options appended for the test binaries' own sources (e.g. -O0)")

# mlacheck_add_library(name SOURCES ... DEPS ...): a static library of the project's code. The
# libraries of the layers a kernel project builds on (core, oracle, kernels, harness, properties)
# are installed and exported as mlacheck::<name without "mlacheck_"> (cmake/Install.cmake) for the
# package's one target, mlacheck::mlacheck (include/CMakeLists.txt), to link; their headers go under
# include/mlacheck/internal/ so that "core/view.h" resolves the same way installed.
function(mlacheck_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                            $<INSTALL_INTERFACE:include/mlacheck/internal> $<INSTALL_INTERFACE:include>)
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${MLACHECK_WARNINGS}>)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  string(REGEX REPLACE "/.*" "" layer "${rel}")
  if(layer MATCHES "^(core|oracle|kernels|harness|properties)$")
    string(REGEX REPLACE "^mlacheck_" "" short ${name})
    set_target_properties(${name} PROPERTIES EXPORT_NAME ${short})
    set_property(GLOBAL APPEND PROPERTY MLACHECK_INSTALLED_LIBRARIES ${name})
  endif()
endfunction()

# mlacheck_add_gtest(name SOURCES ... DEPS ... LABELS ... [COST seconds]): a GoogleTest binary, one
# ctest per test. COST: about how long its slowest tests take, so that a fresh build folder (CI's,
# with no timings of an earlier run) starts them first instead of last (ctest -j orders by COST).
function(mlacheck_add_gtest name)
  cmake_parse_arguments(A "" "COST" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${MLACHECK_WARNINGS} ${MLACHECK_TEST_COMPILE_OPTIONS}>)
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  if(NOT A_COST)
    set(A_COST 0)
  endif()
  # Property tests run MLACHECK_PROPERTY_CASES cases each (RapidCheck's RC_PARAMS may override).
  # NO_PRETTY_VALUES: a parameterized test's name is its own, not its parameter's printed bytes
  # (addresses that change with every build, so ctest's timings and -R patterns never matched).
  # TEST_TMPDIR: ::testing::TempDir() is this build tree's own, so two test runs at once (the
  # sanitizer and the Release build, or two clones) never share a test's scratch folder (a Python
  # test's saved case was once overwritten by the other build's run of the same test).
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/test-tmp)
  # The labels scripts/main.sh runs: its target main_job builds these binaries (CMakeLists.txt).
  if(A_LABELS MATCHES "(^|;)(property|fuzz)(;|$)")
    set_property(GLOBAL APPEND PROPERTY MLACHECK_MAIN_JOB_TARGETS ${name})
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST NO_PRETTY_VALUES NO_PRETTY_TYPES
                       PROPERTIES LABELS "${A_LABELS}" COST ${A_COST}
                                  ENVIRONMENT "RC_PARAMS=max_success=${MLACHECK_PROPERTY_CASES}"
                                  ENVIRONMENT_MODIFICATION "TEST_TMPDIR=set:${CMAKE_BINARY_DIR}/test-tmp/")
endfunction()

# mlacheck_add_gpu_test(name SOURCES ... DEPS ...): a CUDA test binary that prints "skipped: no
# GPU" and exits 77 (ctest's SKIP_RETURN_CODE) when no device is present.
function(mlacheck_add_gpu_test name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  if(NOT MLACHECK_HAVE_CUDA)
    return()
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} CUDA::cudart_static)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endfunction()

# mlacheck_add_hip_check(name SOURCE file): compiles a device source with hipcc for every HIP
# architecture, as part of the build, and registers a ctest (label hip) that confirms the object
# holds code for each one.
function(mlacheck_add_hip_check name)
  cmake_parse_arguments(A "" "SOURCE" "" ${ARGN})
  if(NOT MLACHECK_HAVE_HIP)
    return()
  endif()
  set(obj ${CMAKE_CURRENT_BINARY_DIR}/${name}.o)
  set(arch_flags)
  foreach(arch IN LISTS MLACHECK_HIP_ARCHS)
    list(APPEND arch_flags --offload-arch=${arch})
  endforeach()
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${CMAKE_CXX_COMPILER_LAUNCHER} ${MLACHECK_HIPCC} -x hip -std=c++17 -O2 ${arch_flags} -I${PROJECT_SOURCE_DIR} -c ${A_SOURCE} -o ${obj}
    DEPENDS ${A_SOURCE}
    IMPLICIT_DEPENDS CXX ${A_SOURCE}
    COMMENT "hipcc ${A_SOURCE} for ${MLACHECK_HIP_ARCHS}"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${obj})
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -DOBJECT=${obj} "-DARCHS=${MLACHECK_HIP_ARCHS}"
                                -P ${PROJECT_SOURCE_DIR}/cmake/CheckHipObject.cmake)
  set_tests_properties(${name} PROPERTIES LABELS hip)
endfunction()

# mlacheck_add_kernels(name SOURCES a.cu ... DEPS ...): kernel files, each one source for every
# backend (core/backend/simt.h):
#   <name>_host  a static library of the sources compiled as C++ for the host backend (always);
#   <name>_cuda  the same sources compiled by nvcc (when CUDA is on);
#   <name>_hip_<file>  a hipcc compile of each source for every HIP architecture (when hipcc is
#                present), part of the build: a file that does not compile for HIP fails the build.
function(mlacheck_add_kernels name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  set(host_sources)
  foreach(src IN LISTS A_SOURCES)
    get_filename_component(abs ${src} ABSOLUTE)
    get_filename_component(stem ${src} NAME_WE)
    # The host compiler sees the .cu through a generated wrapper (a file has one language per target).
    set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/${name}_host/${stem}.host.cpp)
    file(GENERATE OUTPUT ${wrapper} CONTENT "// Generated: ${src} compiled for the host backend.\n#include \"${abs}\"\n")
    list(APPEND host_sources ${wrapper})
    mlacheck_add_hip_check(${name}_hip_${stem} SOURCE ${abs})
  endforeach()
  mlacheck_add_library(${name}_host SOURCES ${host_sources} DEPS mlacheck_simt_host ${A_DEPS})
  if(MLACHECK_HAVE_CUDA)
    mlacheck_add_library(${name}_cuda SOURCES ${A_SOURCES} DEPS mlacheck_simt_cuda ${A_DEPS})
  endif()
endfunction()

# How the harnesses get a fuzzing engine: clang's libFuzzer by default; OSS-Fuzz and ClusterFuzzLite
# builds pass their $LIB_FUZZING_ENGINE (a flag, or the path of an engine library) and instrument
# every object through CFLAGS/CXXFLAGS themselves.
set(MLACHECK_FUZZ_ENGINE "-fsanitize=fuzzer" CACHE STRING
    "Link flags or libraries giving the fuzz harnesses their engine and main (OSS-Fuzz: $LIB_FUZZING_ENGINE)")

# mlacheck_add_fuzzer(name SOURCES ... DEPS ... CORPUS dir RUNS n [TIME s]): a libFuzzer harness, and
# a ctest (label fuzz) that replays its corpus and then fuzzes for n runs (or s seconds, if sooner).
function(mlacheck_add_fuzzer name)
  cmake_parse_arguments(A "" "CORPUS;RUNS;TIME" "SOURCES;DEPS" ${ARGN})
  if(NOT MLACHECK_HAVE_FUZZ)
    return()
  endif()
  add_executable(${name} ${A_SOURCES})
  set_property(GLOBAL APPEND PROPERTY MLACHECK_MAIN_JOB_TARGETS ${name})  # its ctest is label fuzz
  if(MLACHECK_FUZZ_ENGINE STREQUAL "-fsanitize=fuzzer")
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer ${MLACHECK_WARNINGS})
  else()
    target_compile_options(${name} PRIVATE ${MLACHECK_WARNINGS})
  endif()
  separate_arguments(engine UNIX_COMMAND "${MLACHECK_FUZZ_ENGINE}")
  foreach(item IN LISTS engine)
    if(item MATCHES "^-")
      target_link_options(${name} PRIVATE ${item})
    else()
      target_link_libraries(${name} PRIVATE ${item})
    endif()
  endforeach()
  target_link_libraries(${name} PRIVATE ${A_DEPS})
  if(NOT A_RUNS)
    set(A_RUNS 20000)
  endif()
  set(limit "-runs=${A_RUNS}")
  if(A_TIME)
    set(limit "${limit} -max_total_time=${A_TIME}")  # whichever comes first, after the corpus replay
  endif()
  # Fuzz into a scratch folder so new inputs never land in the source tree; a crashing input is
  # kept under <build>/fuzz/<name>.artifacts/ to replay (pass it to the harness) or add to the corpus.
  set(work ${CMAKE_CURRENT_BINARY_DIR}/${name}.work)
  set(artifacts ${CMAKE_CURRENT_BINARY_DIR}/${name}.artifacts/)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
                   sh -c "rm -rf '${work}' && mkdir -p '${work}' && mkdir -p '${artifacts}' && '$<TARGET_FILE:${name}>' -seed=1 ${limit} -max_len=512 -artifact_prefix='${artifacts}' '${work}' '${A_CORPUS}'")
  set_tests_properties(${name} PROPERTIES LABELS fuzz)
  if(A_TIME)
    set_tests_properties(${name} PROPERTIES COST ${A_TIME})  # started early in a fresh build folder
  endif()
endfunction()
