/* vk_ctx.h — a Vulkan compute context for the backend: the loader opened at run time (dlopen of libvulkan.so.1, so
 * the library links without it and a machine without Vulkan gets one clear error), the instance (with the Khronos
 * validation layer when TG_VULKAN_VALIDATE=1), physical device N, one compute queue, host-visible buffers, compute
 * pipelines over one descriptor set layout, and one command buffer submitted and waited for.
 *
 * Validation: with TG_VULKAN_VALIDATE=1 every warning or error the layer reports is printed on stderr and counted
 * (tg_vk_messages); the backend then fails its create, or leaves NaN logits from a call, so a session reports an
 * error: the tests fail on any message. */
#ifndef TG_BACKEND_VULKAN_VK_CTX_H
#define TG_BACKEND_VULKAN_VK_CTX_H

#define VK_NO_PROTOTYPES
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "util/error.h"

/* The entry points the backend uses, loaded from the driver (one list, expanded where it is needed). */
#define TG_VK_FUNCS(X)                                                                                                \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                               \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice)              \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements)      \
    X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory)                         \
    X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)   \
    X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)             \
    X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets)        \
    X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer)                \
    X(vkEndCommandBuffer) X(vkResetCommandBuffer) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets)                     \
    X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkQueueSubmit) X(vkCreateFence)                  \
    X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences) X(vkCmdCopyBuffer)                                        \
    X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)

typedef struct {
#define TG_VK_FIELD(name) PFN_##name name;
    TG_VK_FUNCS(TG_VK_FIELD)
#undef TG_VK_FIELD
} tg_vk_fns;

/* Where a buffer lives: the device's own memory (filled by tg_vk_upload, read back by a recorded copy; a device
 * without device-local memory, lavapipe, gives host memory), host-visible memory the host writes and the device
 * reads (device-local too where the device has such memory: the row table), or host-visible memory the host reads
 * (cached where it can be: what the device copies back). */
typedef enum { TG_VK_DEVICE, TG_VK_SHARED, TG_VK_READBACK } tg_vk_mem;

/* A storage buffer; `map` is its mapping for its whole life when it is SHARED or READBACK (NULL for DEVICE). */
typedef struct {
    VkBuffer buf;
    VkDeviceMemory mem;
    void *map;
    size_t bytes;
} tg_vk_buf;

#define TG_VK_BINDINGS 6 /* the descriptor set every pipeline shares (shaders/common.glsl) */
#define TG_VK_PUSH_BYTES 128

typedef struct tg_vk_ctx {
    void *lib; /* dlopen handle of the loader */
    PFN_vkGetInstanceProcAddr get_proc;
    tg_vk_fns f;
    VkInstance inst;
    VkDebugUtilsMessengerEXT messenger; /* validation only */
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;
    int messages;                       /* validation warnings and errors reported so far */
    VkPhysicalDevice phys;
    char device_name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    VkPhysicalDeviceLimits limits;
    VkPhysicalDeviceMemoryProperties mem_props;
    uint32_t queue_family;
    uint32_t timestamp_bits; /* the queue's valid timestamp bits (0: no timestamps) */
    uint32_t subgroup_size;  /* invocations of a subgroup in compute shaders (subgroup arithmetic is required) */
    VkDevice dev;
    VkQueue queue;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipe_layout;
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    tg_vk_buf staging; /* tg_vk_upload's, made on first use */
} tg_vk_ctx;

/* Opens device `index` (the N of --device vulkan:N): NULL with one message when the loader, a device or a feature
 * is missing (the message names what, and lists the devices when index is out of range). */
tg_vk_ctx *tg_vk_open(int index, tg_error *err);
void tg_vk_close(tg_vk_ctx *c);

/* A buffer of `bytes` (> 0) in memory `mem`; false (err filled, naming `what`) when it exceeds the device's
 * storage range or memory runs out. Its bytes are undefined until written. */
bool tg_vk_buf_new(tg_vk_ctx *c, size_t bytes, tg_vk_mem mem, const char *what, tg_vk_buf *b, tg_error *err);
void tg_vk_buf_free(tg_vk_ctx *c, tg_vk_buf *b);

/* Copies src[bytes] to dst at byte `at` through a host-visible staging buffer, submitted and waited for (not
 * inside a recording); false (err filled) when the device fails. */
bool tg_vk_upload(tg_vk_ctx *c, tg_vk_buf *dst, size_t at, const void *src, size_t bytes, tg_error *err);

/* Records copies of regions[n] from src to dst after the dispatches recorded so far (their writes made visible to
 * the copy; the copy's made visible to the host at the submission's end). */
void tg_vk_copy(tg_vk_ctx *c, const tg_vk_buf *src, const tg_vk_buf *dst, const VkBufferCopy *regions, uint32_t n);

/* The compute pipeline of embedded shader `name` (shaders.h); VK_NULL_HANDLE with err filled when it is missing or
 * the driver refuses it. */
VkPipeline tg_vk_pipeline(tg_vk_ctx *c, const char *name, tg_error *err);

/* Starts recording the context's command buffer / ends it, submits it and waits for it (false, err filled, when the
 * device reports a failure). */
bool tg_vk_begin(tg_vk_ctx *c, tg_error *err);
bool tg_vk_submit_wait(tg_vk_ctx *c, tg_error *err);
/* Records a dispatch of pipeline pl over set with push constants push[push_bytes], then a barrier that makes its
 * writes visible to the next dispatch and to the host. */
void tg_vk_dispatch(tg_vk_ctx *c, VkPipeline pl, VkDescriptorSet set, const void *push, size_t push_bytes,
                    uint32_t gx, uint32_t gy, uint32_t gz);
/* The same without the barrier after it: for a dispatch whose writes the next dispatch neither reads nor writes
 * (the products of one input into separate outputs); the barrier after the next one covers both. */
void tg_vk_dispatch_free(tg_vk_ctx *c, VkPipeline pl, VkDescriptorSet set, const void *push, size_t push_bytes,
                         uint32_t gx, uint32_t gy, uint32_t gz);

/* Records a barrier that makes the writes of the dispatches recorded so far visible to the next dispatch and to the
 * host (after dispatches recorded with tg_vk_dispatch_free). */
void tg_vk_barrier(tg_vk_ctx *c);
/* Validation messages reported so far (0 without validation). */
int tg_vk_messages(const tg_vk_ctx *c);

#endif
