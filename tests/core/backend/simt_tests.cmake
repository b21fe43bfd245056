# The backend test kernels (simt_test_kernels.cu, one source for host, cuda and hip) and their tests.
set(simt_dir ${CMAKE_CURRENT_LIST_DIR})
mlacheck_add_kernels(simt_test_kernels SOURCES ${simt_dir}/simt_test_kernels.cu DEPS mlacheck_core)
add_library(simt_test_checks STATIC ${simt_dir}/simt_test_checks.cpp)
target_link_libraries(simt_test_checks PUBLIC mlacheck_core)
mlacheck_add_gtest(simt_host_tests SOURCES ${simt_dir}/simt_host_test.cpp
                   DEPS simt_test_kernels_host simt_test_checks LABELS unit)
