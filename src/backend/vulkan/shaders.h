/* shaders.h — the Vulkan backend's compute shaders as SPIR-V: compiled from the shaders folder's .comp files by
 * glslc at build time and embedded by tools/spv_embed.sh (the generated file is build/gen/vk_shaders.c). */
#ifndef TG_BACKEND_VULKAN_SHADERS_H
#define TG_BACKEND_VULKAN_SHADERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;     /* the .comp file's base name: "matmul" */
    const uint32_t *code; /* [bytes / 4] SPIR-V words */
    size_t bytes;
} tg_vk_shader;

extern const tg_vk_shader tg_vk_shaders[];
extern const int tg_vk_n_shaders;

#endif
