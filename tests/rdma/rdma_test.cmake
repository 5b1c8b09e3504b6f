# Tests that run in the RDMA test bed (tests/rdma/guest): a QEMU guest on Debian 12's kernel with
# Soft-RoCE, running binaries of this build tree against the kernel's verbs stack.
#
# hmc_add_rdma_test(NAME <name> [TOPOLOGY one|veth|rails] [TIMEOUT <s>] [CPUS <n>] [MEM <MiB>]
#                   [LABELS <label>...] [ENVIRONMENT <VAR=value>...] COMMAND <command> [<arg>...])
#
# Registers a ctest test that boots the guest with the topology (default one), runs COMMAND in it
# as root in the build directory, with ENVIRONMENT set, and passes or fails with COMMAND's exit
# status. Labelled rdma (and LABELS); skipped (77) with the reason where the test bed cannot run.
# The guest image is built once per build tree by the fixture test rdma_guest_image. COMMAND may
# use generator expressions ($<TARGET_FILE:net_test>). Guest tests hold the lock hmc_rdma_guest
# and CPUS processors (default 2), so that no two emulated guests share the cores.
set(HMC_RDMA_GUEST ${CMAKE_CURRENT_LIST_DIR}/guest)
set(HMC_RDMA_GUEST_DIR ${PROJECT_BINARY_DIR}/rdma-guest)

function(hmc_add_rdma_test)
  cmake_parse_arguments(T "" "NAME;TOPOLOGY;TIMEOUT;CPUS;MEM" "LABELS;ENVIRONMENT;COMMAND" ${ARGN})
  if(NOT T_NAME OR NOT T_COMMAND)
    message(FATAL_ERROR "hmc_add_rdma_test: NAME and COMMAND are required")
  endif()
  if(NOT T_TOPOLOGY)
    set(T_TOPOLOGY one)
  endif()
  if(NOT T_TOPOLOGY MATCHES "^(one|veth|rails)$")
    message(FATAL_ERROR "hmc_add_rdma_test(${T_NAME}): TOPOLOGY is one, veth or rails, not ${T_TOPOLOGY}")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_CPUS)
    set(T_CPUS 2)
  endif()
  if(NOT T_MEM)
    set(T_MEM 2048)
  endif()
  # The guest powers itself off before ctest would kill it, so its console's tail is reported.
  math(EXPR guest_timeout "${T_TIMEOUT} - 15")
  set(env_prefix)
  if(T_ENVIRONMENT)
    set(env_prefix env ${T_ENVIRONMENT})
  endif()
  add_test(NAME ${T_NAME}
    COMMAND bash ${HMC_RDMA_GUEST} run --topology ${T_TOPOLOGY} --cpus ${T_CPUS} --mem ${T_MEM}
            --timeout ${guest_timeout} --share ${PROJECT_SOURCE_DIR} --share ${PROJECT_BINARY_DIR}
            -- ${env_prefix} ${T_COMMAND}
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  set_tests_properties(${T_NAME} PROPERTIES
    LABELS "rdma;${T_LABELS}"
    TIMEOUT ${T_TIMEOUT}
    SKIP_RETURN_CODE 77
    ENVIRONMENT HMC_RDMA_GUEST_DIR=${HMC_RDMA_GUEST_DIR}
    FIXTURES_REQUIRED hmc_rdma_guest_image
    RESOURCE_LOCK hmc_rdma_guest
    PROCESSORS ${T_CPUS})
endfunction()
