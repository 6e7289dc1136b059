/* bundled.c — finding the bundled model next to the executable (bundled.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/bundled.h"

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"

/* The running executable's path into exe[cap] (terminated); false where it cannot be found: /proc/self/exe on
 * Linux, _NSGetExecutablePath on macOS (which may name it through a symbolic link: enough to find a file beside it). */
static bool executable_path(char *exe, size_t cap) {
#if defined(__APPLE__)
    uint32_t size = (uint32_t)cap;
    return cap <= UINT32_MAX && _NSGetExecutablePath(exe, &size) == 0;
#else
    ssize_t n = readlink("/proc/self/exe", exe, cap - 1);
    if (n <= 0) return false;
    exe[n] = '\0';
    return true;
#endif
}

/* On failure `looked` names the executable's directory. */
static bool find_bundled_model(char *out, size_t cap, char *looked, size_t looked_cap) {
    char exe[4096];
    if (!executable_path(exe, sizeof exe)) {
        snprintf(looked, looked_cap, "(cannot find the executable's path)");
        return false;
    }
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(looked, looked_cap, "%s", exe);
    static const char *const ups[] = {"", "/..", "/../.."};
    for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++) {
        int w = snprintf(out, cap, "%s%s/" TG_BUNDLED_MODEL, exe, ups[i]);
        struct stat st;
        if (w > 0 && (size_t)w < cap && stat(out, &st) == 0) return true;
    }
    return false;
}

const char *tg_model_or_bundled(const char *given, const char *cmd, char *buf, size_t cap) {
    if (given) return given;
    char looked[4096];
    if (find_bundled_model(buf, cap, looked, sizeof looked)) return buf;
    (void)tg_runtime_error("no MODEL given and the bundled model " TG_BUNDLED_MODEL " was not found (looked next to "
                           "%s); pass one: tinygpt %s MODEL ...",
                           looked, cmd);
    return NULL;
}

tg_model *tg_load_model_or_bundled(const char *given, const char *cmd, tg_model_need need, const char **path, char *buf,
                                   size_t cap) {
    *path = tg_model_or_bundled(given, cmd, buf, cap);
    if (!*path) return NULL;
    tg_error err = {0};
    tg_model *model = tg_model_load_for(*path, need, &err);
    if (!model) (void)tg_runtime_error("%s", err.msg);
    return model;
}
