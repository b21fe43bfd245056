# Detects the optional toolchains and switches their targets on or off, one status line each.
#
#   MLACHECK_CUDA = AUTO | ON | OFF   nvcc at $CUDACXX or /usr/local/cuda/bin/nvcc; sm_90a and sm_100a
#   MLACHECK_HIP  = AUTO | ON | OFF   hipcc on PATH; compile checks for gfx90a and gfx940
#   MLACHECK_FUZZ = AUTO | ON | OFF   libFuzzer harnesses; needs clang as the C++ compiler
# ON makes a missing toolchain a configure error; AUTO reports it and goes on.

set(MLACHECK_CUDA AUTO CACHE STRING "Build the CUDA backend and GPU tests (AUTO, ON, OFF)")
set(MLACHECK_HIP AUTO CACHE STRING "Compile-check kernels with hipcc (AUTO, ON, OFF)")
set(MLACHECK_FUZZ AUTO CACHE STRING "Build libFuzzer harnesses (AUTO, ON, OFF)")
set_property(CACHE MLACHECK_CUDA MLACHECK_HIP MLACHECK_FUZZ PROPERTY STRINGS AUTO ON OFF)

function(_mlacheck_toolchain_off what mode reason)
  if(mode STREQUAL "ON")
    message(FATAL_ERROR "mlacheck: ${what} was required (ON) but ${reason}")
  endif()
  message(STATUS "mlacheck: ${what} off: ${reason}")
endfunction()

# CUDA.
set(MLACHECK_HAVE_CUDA OFF)
if(MLACHECK_CUDA STREQUAL "OFF")
  message(STATUS "mlacheck: CUDA off: MLACHECK_CUDA=OFF")
else()
  if(NOT DEFINED ENV{CUDACXX} AND NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  if(DEFINED ENV{CUDACXX} OR CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a 100a)
    endif()
    # nvcc compiles host code with g++ whatever the C++ compiler is (clang 14 is not one nvcc 13
    # accepts); the objects link with either.
    if(NOT CMAKE_CUDA_HOST_COMPILER AND EXISTS /usr/bin/g++)
      set(CMAKE_CUDA_HOST_COMPILER /usr/bin/g++)
    endif()
    enable_language(CUDA)
    # With sanitizer link flags, CMake records g++'s sanitizer runtimes (libasan, libubsan) among the
    # CUDA link libraries; a clang build links its own, and two ASan runtimes refuse to start.
    list(REMOVE_ITEM CMAKE_CUDA_IMPLICIT_LINK_LIBRARIES asan ubsan)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(MLACHECK_HAVE_CUDA ON)
    message(STATUS "mlacheck: CUDA on: ${CMAKE_CUDA_COMPILER} for ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    _mlacheck_toolchain_off("CUDA" "${MLACHECK_CUDA}" "no nvcc at /usr/local/cuda/bin and CUDACXX is not set")
  endif()
endif()

# HIP: Debian's hipcc 5.2 knows gfx90a and gfx940 (not gfx942). Kernels are compile-checked only.
set(MLACHECK_HAVE_HIP OFF)
if(MLACHECK_HIP STREQUAL "OFF")
  message(STATUS "mlacheck: HIP off: MLACHECK_HIP=OFF")
else()
  find_program(MLACHECK_HIPCC hipcc)
  if(MLACHECK_HIPCC)
    set(MLACHECK_HAVE_HIP ON)
    set(MLACHECK_HIP_ARCHS gfx90a gfx940)
    message(STATUS "mlacheck: HIP on: ${MLACHECK_HIPCC} compile checks for ${MLACHECK_HIP_ARCHS}")
  else()
    _mlacheck_toolchain_off("HIP" "${MLACHECK_HIP}" "no hipcc on PATH (scripts/setup installs Debian's)")
  endif()
endif()

# The read fence (core/read_fence.h) lets a launch go on after AddressSanitizer reports a read past
# a view, so that the read becomes a verdict with its case rather than the end of the program: the
# C++ code is compiled to recover from AddressSanitizer errors (the fence's error hook still ends the
# program on any error outside a fence, after its report).
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*address")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize-recover=address>)
  message(STATUS "mlacheck: AddressSanitizer: read fences on (-fsanitize-recover=address)")
endif()

# libFuzzer comes with clang (-fsanitize=fuzzer).
set(MLACHECK_HAVE_FUZZ OFF)
set(MLACHECK_FUZZ_COVERAGE OFF)
set(MLACHECK_FUZZ_COVERAGE_HOOKS OFF)
if(MLACHECK_FUZZ STREQUAL "OFF")
  message(STATUS "mlacheck: libFuzzer off: MLACHECK_FUZZ=OFF")
elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(MLACHECK_HAVE_FUZZ ON)
  message(STATUS "mlacheck: libFuzzer on: ${CMAKE_CXX_COMPILER}")
  # Coverage of the kernels and glue, not only of the harness. Binaries without libFuzzer get the
  # hooks from the sanitizer runtime, or without one from core/coverage_hooks.cpp. Only where
  # the fuzzer should steer (see mlacheck_fuzz_coverage): the kernels get counters and comparison
  # hooks, the case parsers and checks counters only, and the toolkit's own loops (guarded memory,
  # the host executor, the oracle) nothing; hooks there cost a third of a small case's time.
  set(MLACHECK_FUZZ_COVERAGE ON)
  if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*address")
    message(STATUS "mlacheck: libFuzzer coverage of kernels/ (edges + comparisons) and properties/ (edges)")
  else()
    # No sanitizer runtime to lend its weak hooks to the binaries without libFuzzer (the tool, the
    # tests, plugins): core/coverage_hooks.cpp, in mlacheck_core, has them, empty.
    set(MLACHECK_FUZZ_COVERAGE_HOOKS ON)
    message(STATUS "mlacheck: libFuzzer coverage of kernels/ (edges + comparisons) and properties/ (edges); "
                   "empty hooks in mlacheck_core for the binaries without libFuzzer")
  endif()
else()
  _mlacheck_toolchain_off("libFuzzer" "${MLACHECK_FUZZ}"
                          "the C++ compiler is ${CMAKE_CXX_COMPILER_ID}, not clang (use the asan preset)")
endif()

# mlacheck_fuzz_coverage(FULL|EDGES): libFuzzer coverage for the C++ objects of the calling
# directory. FULL is -fsanitize=fuzzer-no-link (edge counters, indirect calls, comparison hooks);
# EDGES is the counters alone.
function(mlacheck_fuzz_coverage kind)
  if(NOT MLACHECK_FUZZ_COVERAGE)
    return()
  endif()
  if(kind STREQUAL "FULL")
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  elseif(kind STREQUAL "EDGES")
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize-coverage=inline-8bit-counters,pc-table>)
  else()
    message(FATAL_ERROR "mlacheck_fuzz_coverage: FULL or EDGES, not '${kind}'")
  endif()
endfunction()

# Python (docs/python.md): nothing of Python is linked; `--python` starts an interpreter as a
# worker at run time: $MLACHECK_PYTHON, else an active virtualenv's or conda env's python3, else
# MLACHECK_DEFAULT_PYTHON (the project's environment from PyPI that scripts/pyenv.sh made and
# .venv links to, baked in by its real path so an installed mlacheck keeps it), else python3 on
# PATH. The tests use the same environment.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/python/requirements.lock")
if(NOT DEFINED MLACHECK_DEFAULT_PYTHON)
  set(MLACHECK_DEFAULT_PYTHON "")
  # A link is enough: scripts/main.sh makes it while the environment is still being made.
  if(EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python" OR IS_SYMLINK "${PROJECT_SOURCE_DIR}/.venv")
    get_filename_component(_mlacheck_pyenv "${PROJECT_SOURCE_DIR}/.venv" REALPATH)
    set(MLACHECK_DEFAULT_PYTHON "${_mlacheck_pyenv}/bin/python")
  endif()
endif()
if(NOT MLACHECK_TEST_PYTHON)
  if(MLACHECK_DEFAULT_PYTHON)
    set(MLACHECK_TEST_PYTHON "${MLACHECK_DEFAULT_PYTHON}")
  else()
    find_program(MLACHECK_TEST_PYTHON python3)
  endif()
endif()
message(STATUS "mlacheck: --python's default interpreter '${MLACHECK_DEFAULT_PYTHON}'; the Python tests use ${MLACHECK_TEST_PYTHON}")
