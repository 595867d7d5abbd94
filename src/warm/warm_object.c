/* agentbox-warm.so's bytes in the library (warm.c writes them into a
 * sealed memfd): no path has to exist in the sandbox, and packaging does
 * not change. CMake builds the object first and passes its path. */
#ifndef AB_WARM_OBJECT_PATH
#error "AB_WARM_OBJECT_PATH: the path of agentbox-warm.so, from CMakeLists.txt"
#endif

__asm__(".section .rodata\n"
	".global ab_warm_object\n"
	".global ab_warm_object_end\n"
	".hidden ab_warm_object\n"
	".hidden ab_warm_object_end\n"
	".balign 16\n"
	"ab_warm_object:\n"
	".incbin \"" AB_WARM_OBJECT_PATH "\"\n"
	"ab_warm_object_end:\n"
	".previous\n");
