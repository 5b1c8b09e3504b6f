// HMC_HOT marks the functions on the path of every message (post, test, wait, completion), so
// that the compiler optimises them for speed and places them together (.text.hot). On a VM that
// flushes the TLB at every system call, each further code page touched between receiving a
// message and sending the next one is a page walk; see the README's latency notes.
#pragma once

#if defined(__GNUC__)
#define HMC_HOT __attribute__((hot))
#else
#define HMC_HOT
#endif
