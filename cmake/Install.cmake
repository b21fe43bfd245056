# The installable package: `cmake --install build/<preset> --prefix P`, then in a kernel project
#   find_package(mlacheck REQUIRED)        # with CMAKE_PREFIX_PATH=P
#   target_link_libraries(my_tests PRIVATE mlacheck::mlacheck)
#   #include "mlacheck/properties.h"      // or memory.h, oracle.h, cases.h; plugin.h for a plugin
# The public API is the headers of include/mlacheck/ and the target mlacheck::mlacheck: cases,
# guarded buffers, the oracle, properties and verdicts, the plugin ABI. The static libraries behind
# it and the headers the public ones include (include/mlacheck/internal/<layer>/) are installed
# because they need them, not as API. Built with the compiler and flags of this build (an ASan
# build's libraries need -fsanitize=address,undefined in the consumer too).
include(CMakePackageConfigHelpers)

get_property(mlacheck_libraries GLOBAL PROPERTY MLACHECK_INSTALLED_LIBRARIES)
install(TARGETS ${mlacheck_libraries} EXPORT mlacheckTargets ARCHIVE DESTINATION lib)
install(TARGETS mlacheck RUNTIME DESTINATION bin)
foreach(layer core oracle kernels harness properties)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/ DESTINATION include/mlacheck/internal/${layer}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mlacheck/ DESTINATION include/mlacheck FILES_MATCHING PATTERN "*.h")
install(EXPORT mlacheckTargets NAMESPACE mlacheck:: DESTINATION lib/cmake/mlacheck)

set(MLACHECK_PACKAGE_WITH_CUDA ${MLACHECK_HAVE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mlacheckConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfig.cmake INSTALL_DESTINATION lib/cmake/mlacheck)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfigVersion.cmake
        DESTINATION lib/cmake/mlacheck)
