// ThreadSanitizer suppressions built into the test program (so they apply however it is run).
//
// libtbb is not instrumented: TSan sees its malloc/free/memcmp through interceptors but none of
// its synchronization, so oneTBB's own bookkeeping (e.g. freeing a worker's buffers on
// shutdown) looks racy. `called_from_lib` ignores only what libtbb itself calls; every access
// made by our code, including code inlined from oneTBB headers, is still checked.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() { return "called_from_lib:libtbb.so\n"; }
#endif
