# The installable package: `cmake --install build/<preset> --prefix P`, then in a kernel project
#   find_package(mlacheck REQUIRED)        # with CMAKE_PREFIX_PATH=P
#   target_link_libraries(my_tests PRIVATE mlacheck::topk_properties mlacheck::oracle ...)
# gives the oracle, the generators and properties, guarded buffers and the host backend as static
# libraries with their headers (include/mlacheck/<layer>/...), the plugin header
# (include/mlacheck/plugin.h) and the mlacheck command. Built with the compiler and flags of this
# build (an ASan build's libraries need -fsanitize=address,undefined in the consumer too).
include(CMakePackageConfigHelpers)

get_property(mlacheck_libraries GLOBAL PROPERTY MLACHECK_INSTALLED_LIBRARIES)
install(TARGETS ${mlacheck_libraries} EXPORT mlacheckTargets ARCHIVE DESTINATION lib)
install(TARGETS mlacheck RUNTIME DESTINATION bin)
foreach(layer core oracle kernels properties)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/ DESTINATION include/mlacheck/${layer}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/mlacheck/plugin.h DESTINATION include/mlacheck)
install(EXPORT mlacheckTargets NAMESPACE mlacheck:: DESTINATION lib/cmake/mlacheck)

set(MLACHECK_PACKAGE_WITH_CUDA ${MLACHECK_HAVE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mlacheckConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfig.cmake INSTALL_DESTINATION lib/cmake/mlacheck)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/mlacheckConfigVersion.cmake
        DESTINATION lib/cmake/mlacheck)
