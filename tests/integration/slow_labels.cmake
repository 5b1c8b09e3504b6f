# Included by ctest after tests/integration's discovered tests are defined (see CMakeLists.txt):
# labels the 1 GiB tests `slow` besides `integration`.
if(DEFINED hmc_integration_slow_test_TESTS)
  set_tests_properties(${hmc_integration_slow_test_TESTS} PROPERTIES LABELS "integration;slow" TIMEOUT 300)
endif()
