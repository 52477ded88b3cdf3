//go:build linux && cgo

package store

/*
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RELAYBOT_MALLOC_ARENAS 2

// relaybot_cap_arenas runs when the process is loaded, before the Go runtime starts a thread:
// glibc gives each thread that allocates an arena of its own (up to eight per core) and uses a
// cap only for the arenas it makes after it is set. An operator's MALLOC_ARENA_MAX, or a
// glibc.malloc tunable, is left to decide. Without M_ARENA_MAX (musl) it does nothing.
__attribute__((constructor)) static void relaybot_cap_arenas(void) {
#ifdef M_ARENA_MAX
	const char *tunables = getenv("GLIBC_TUNABLES");
	if (getenv("MALLOC_ARENA_MAX") != NULL || (tunables != NULL && strstr(tunables, "glibc.malloc.arena_") != NULL)) {
		return;
	}
	mallopt(M_ARENA_MAX, RELAYBOT_MALLOC_ARENAS);
#endif
}

// relaybot_arenas counts the arenas glibc's malloc_info reports, or returns -1.
static int relaybot_arenas(void) {
#ifdef M_ARENA_MAX
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL) return -1;
	int rc = malloc_info(0, f);
	fclose(f);
	int n = rc == 0 ? 0 : -1;
	for (char *p = buf; rc == 0 && (p = strstr(p, "<heap nr=")) != NULL; p++) n++;
	free(buf);
	return n;
#else
	return -1;
#endif
}
*/
import "C"

// mallocArenaCap is the cap on the C heap's arenas that the process sets when it is loaded
// (relaybot_cap_arenas above). SQLite is the process's C code: its page caches and statements
// are allocated on whichever thread the Go scheduler runs a query on, and an arena keeps what
// it grew, so with an arena per thread every thread that ever ran a query kept its own
// high-water mark of them. Its connections (the writer and the readers) are used by a few
// threads at once, which two arenas serve.
const mallocArenaCap = C.RELAYBOT_MALLOC_ARENAS

// mallocArenas is the number of arenas the C heap has, or -1 when the C library cannot say.
func mallocArenas() int { return int(C.relaybot_arenas()) }
