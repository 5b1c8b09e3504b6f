# hmc_add_plugin(<target> KIND device|net NAME <name> SOURCES <src>...)
#
# Builds a plugin shared object named libhmc-<kind>-<name>.so with hidden visibility (only the
# entry symbol, marked HMC_PLUGIN_EXPORT, is exported), no undefined symbols, and the plugin ABI
# headers on its include path. Used in-tree and, through find_package(hmc-sdk), out of tree.
function(hmc_add_plugin target)
  cmake_parse_arguments(P "" "KIND;NAME;OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  if(NOT P_KIND MATCHES "^(device|net)$")
    message(FATAL_ERROR "hmc_add_plugin(${target}): KIND must be device or net")
  endif()
  if(NOT P_NAME MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "hmc_add_plugin(${target}): NAME must be lowercase letters, digits, _")
  endif()
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "hmc-${P_KIND}-${P_NAME}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  if(P_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIRECTORY})
  endif()
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  if(TARGET hmc::sdk)
    target_link_libraries(${target} PRIVATE hmc::sdk)
  else()
    target_link_libraries(${target} PRIVATE hmc_sdk)
  endif()
endfunction()
