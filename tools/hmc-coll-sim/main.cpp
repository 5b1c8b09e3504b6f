// hmc-coll-sim: predicts the time, algbw and busbw of a collective on a described cluster, from
// the schedules hmc's algorithms make (run.h), until hmc-coll-perf --simulate takes this over.
#include <iostream>

#include "options.h"
#include "run.h"

int main(int argc, char** argv) {
  hmc::coll_sim::Options o;
  std::string err;
  if (!hmc::coll_sim::parse_args(argc, argv, &o, &err, HMC_TOOLS_VERSION))
    return hmc_tools::report("hmc-coll-sim", hmc_tools::Parsed::Bad, err, "");
  if (o.help)
    return hmc_tools::report("hmc-coll-sim", hmc_tools::Parsed::Help, "", hmc::coll_sim::usage());
  if (!o.version.empty())
    return hmc_tools::report("hmc-coll-sim", hmc_tools::Parsed::Version, o.version, "");
  const hmc::coll_sim::AlgorithmSource library = {&hmc::coll::parse_algorithm,
                                                  &hmc::coll::make_schedule};
  return hmc::coll_sim::run(o, library, std::cout, std::cerr);
}
