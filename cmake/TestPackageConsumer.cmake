# ctest package.consumer: installs this build into a scratch prefix, builds
# examples/package_consumer against it with find_package(mlacheck) (same compilers and flags), and
# runs its tests. Arguments (-D): BUILD_DIR, SOURCE_DIR, WORK_DIR, C_COMPILER, CXX_COMPILER,
# CXX_FLAGS, LINKER_FLAGS, GENERATOR.
file(REMOVE_RECURSE ${WORK_DIR})
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package.consumer: `${ARGN}` failed (${rc}):\n${out}")
  endif()
endfunction()
step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/package_consumer -B ${WORK_DIR}/build -G ${GENERATOR}
     -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
     "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}" -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step(${WORK_DIR}/build/my_kernel_tests)
message(STATUS "package.consumer: installed, built against the package, tests passed")
