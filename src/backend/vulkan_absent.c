/* vulkan_absent.c — the Vulkan backend's row in a build without Vulkan (the Makefile compiles this file instead of
 * src/backend/vulkan/ when glslc or the Vulkan headers were missing, or with VULKAN=0): asking for it gives one
 * message. */
#include "forward/backend.h"
#include "util/error.h"

tg_backend *tg_backend_vulkan_create(const struct tg_model *m, const tg_program *p, const tg_kvcache *cache,
                                     int max_rows, int device, tg_error *err) {
    (void)m;
    (void)p;
    (void)cache;
    (void)max_rows;
    (void)device;
    tg_fail(err, "this tinygpt was built without Vulkan (it needs glslc and the Vulkan headers, libvulkan-dev, when "
                 "it is built)");
    return NULL;
}

static tg_backend *absent_create(const struct tg_model *m, const tg_program *p, const tg_kvcache *cache,
                                 int max_rows, int n_threads, tg_error *err) {
    (void)n_threads;
    return tg_backend_vulkan_create(m, p, cache, max_rows, 0, err);
}

const tg_backend_i tg_backend_vulkan = {.name = "vulkan", .create = absent_create};
