/* version.c — the library's version, as the running library knows it. */
#include "tinygpt.h"

const char *tg_version(void) { return TG_VERSION_STRING; }
