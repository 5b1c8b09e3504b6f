/*
 * Built by out_of_tree.sh against an installed hmc (its include/ and lib/libhmc.so only): creates
 * a context, which loads plugins from <prefix>/lib/hmc beside the installed libhmc.so, and checks
 * through the public API that every "kind:name" given on the command line was found and loaded.
 * Exit status 0 when they were, 1 otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "hmc/hmc.h"

int main(int argc, char** argv) {
  hmc_context_t ctx;
  hmc_context_options_t opts;
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.progress_thread = 0;
  hmc_status_t st = hmc_context_create(&opts, &ctx);
  if (st != HMC_SUCCESS) {
    fprintf(stderr, "FAIL hmc_context_create: %s: %s\n", hmc_status_string(st), hmc_last_error());
    return 1;
  }
  int count = 0;
  hmc_plugin_count(ctx, &count);
  int good = 1;
  for (int a = 1; a < argc; ++a) {
    int found = 0;
    for (int i = 0; i < count; ++i) {
      hmc_plugin_info_t info;
      memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      if (hmc_plugin_info(ctx, i, &info) != HMC_SUCCESS) continue;
      char want[160];
      snprintf(want, sizeof want, "%s:%s", info.kind == HMC_PLUGIN_KIND_DEVICE ? "device" : "net",
               info.name);
      if (strcmp(want, argv[a]) != 0) continue;
      found = 1;
      printf("%s: %s from %s%s%s\n", argv[a], info.loaded ? "loaded" : "not loaded", info.path,
             info.reason[0] ? ": " : "", info.reason);
      if (!info.loaded) good = 0;
    }
    if (!found) {
      fprintf(stderr, "FAIL %s was not found by the installed libhmc.so\n", argv[a]);
      good = 0;
    }
  }
  hmc_context_destroy(ctx);
  printf("%s\n", good ? "PASS" : "FAIL");
  return good ? 0 : 1;
}
