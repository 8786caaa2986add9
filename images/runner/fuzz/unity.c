/*
 * The supervisor's source files as one translation unit, for the fuzz targets: fuzz_common.h
 * includes this after its emulation macros, so they apply to every file, and the targets reach the
 * files' static functions and state as they are. The image's build (../Makefile) compiles the same
 * files one by one; a file missing here or there fails that build's link.
 */
#include "../relay.c"
#include "../header.c"
#include "../files.c"
#include "../proc.c"
#include "../collect.c"
#include "../fileops.c"
#include "../tools.c"
#include "../kernel.c"
#include "../hermes-run.c"
