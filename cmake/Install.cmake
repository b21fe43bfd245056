# What `cmake --install build/<preset> --prefix P` puts under P, in three components (all three
# by default; `--component NAME` for one):
#   tool         P/bin/mlacheck and the seed and regression cases it finds beside it
#                (P/share/mlacheck/corpus), the Python package (P/share/mlacheck/python), and the
#                example plugin and its buggy twin where they were built (P/share/mlacheck/plugins,
#                examples/plugin/CMakeLists.txt). Install it from a Release build (the default preset):
#                `cmake --install build/default --component tool` puts mlacheck in /usr/local/bin.
#   fuzz         P/fuzz/all_targets_fuzzer and a link <target>_fuzzer to it per target, where the
#                installed mlacheck looks for its harnesses (only in a build with libFuzzer, the asan
#                preset: the harnesses belong in the sanitizer build, the tool in the Release one).
#                P is then laid out like the GPU bundle (scripts/gpu_bundle.sh).
#   development  the CMake package, for a kernel project's own tests:
#   find_package(mlacheck REQUIRED)        # with CMAKE_PREFIX_PATH=P
#   target_link_libraries(my_tests PRIVATE mlacheck::mlacheck)
#   #include "mlacheck/properties.h"      // or memory.h, oracle.h, cases.h; plugin.h for a plugin
# The public API is the headers of include/mlacheck/ and the target mlacheck::mlacheck: cases,
# guarded buffers, the oracle, properties and verdicts, the plugin ABI. The static libraries behind
# it and the headers the public ones include (include/mlacheck/internal/<layer>/) are installed
# because they need them, not as API. Built with the compiler and flags of this build (an ASan
# build's libraries need -fsanitize=address,undefined in the consumer too).
# The ctest install.tool (at the end of this file) installs tool (and fuzz) into a scratch
# prefix and runs the installed mlacheck from outside the source tree.
include(CMakePackageConfigHelpers)

get_property(mlacheck_libraries GLOBAL PROPERTY MLACHECK_INSTALLED_LIBRARIES)
install(TARGETS mlacheck RUNTIME DESTINATION bin COMPONENT tool)
# Built with the tool, so `--target mlacheck` builds everything the tool component installs (a fresh
# clone's main job built the executable alone and the install then found no libmlacheck_guard.so).
add_dependencies(mlacheck mlacheck_guard)
# The guard's byte work, loaded by mlacheck.guard() from the package's own folder.
install(TARGETS mlacheck_guard LIBRARY DESTINATION share/mlacheck/python/mlacheck COMPONENT tool)
# The Python package (docs/python.md), pure Python: PYTHONPATH=<prefix>/share/mlacheck/python.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/mlacheck DESTINATION share/mlacheck/python COMPONENT tool
        PATTERN "__pycache__" EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/corpus/ DESTINATION share/mlacheck/corpus COMPONENT tool
        PATTERN CMakeLists.txt EXCLUDE)
if(MLACHECK_HAVE_FUZZ AND TARGET all_targets_fuzzer)
  install(TARGETS all_targets_fuzzer RUNTIME DESTINATION fuzz COMPONENT fuzz)
  foreach(target ${MLACHECK_FUZZ_TARGETS})
    install(CODE "file(CREATE_LINK all_targets_fuzzer \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/fuzz/${target}_fuzzer\" SYMBOLIC)"
            COMPONENT fuzz)
  endforeach()
endif()

install(TARGETS ${mlacheck_libraries} EXPORT mlacheckTargets ARCHIVE DESTINATION lib COMPONENT development)
foreach(layer core oracle kernels harness properties)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/ DESTINATION include/mlacheck/internal/${layer}
          COMPONENT development FILES_MATCHING PATTERN "*.h" PATTERN "*.def")  # .def: tables headers include
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mlacheck/ DESTINATION include/mlacheck
        COMPONENT development FILES_MATCHING PATTERN "*.h")
install(EXPORT mlacheckTargets NAMESPACE mlacheck:: DESTINATION lib/cmake/mlacheck COMPONENT development)

set(MLACHECK_PACKAGE_WITH_CUDA ${MLACHECK_HAVE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mlacheckConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfig.cmake INSTALL_DESTINATION lib/cmake/mlacheck)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfigVersion.cmake
        DESTINATION lib/cmake/mlacheck COMPONENT development)

# The installed tool runs by its bare name from outside the source tree (cmake/TestInstalledTool.cmake).
set(fuzz_installed OFF)
if(MLACHECK_HAVE_FUZZ AND TARGET all_targets_fuzzer)
  set(fuzz_installed ON)
endif()
add_test(NAME install.tool
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DWORK_DIR=${PROJECT_BINARY_DIR}/install-tool-test -DFUZZ=${fuzz_installed}
                 -P ${PROJECT_SOURCE_DIR}/cmake/TestInstalledTool.cmake)
set_tests_properties(install.tool PROPERTIES LABELS unit TIMEOUT 120)
