// hmc-coll-sim: predicts the time, algbw and busbw of a collective on a described cluster, from
// the schedules hmc's algorithms make (run.h), until hmc-coll-perf --simulate takes this over.
#include <iostream>

#include "options.h"
#include "run.h"
#include "tool_version.h"

int main(int argc, char** argv) {
  if (hmc_tools::version_asked(argc, argv)) return hmc_tools::print_version("hmc-coll-sim");
  hmc::coll_sim::Options o;
  std::string err;
  if (!hmc::coll_sim::parse_args(argc, argv, &o, &err)) {
    std::cerr << "hmc-coll-sim: " << err << "\n";
    return 2;
  }
  if (o.help) {
    std::cout << hmc::coll_sim::usage();
    return 0;
  }
  const hmc::coll_sim::AlgorithmSource library = {&hmc::coll::parse_algorithm,
                                                  &hmc::coll::make_schedule};
  return hmc::coll_sim::run(o, library, std::cout, std::cerr);
}
