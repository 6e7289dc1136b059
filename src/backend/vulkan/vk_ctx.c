/* vk_ctx.c — the Vulkan context of vk_ctx.h: loader, instance, device, queue, memory, pipelines, submission. */
#include "backend/vulkan/vk_ctx.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/shaders.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

static bool vk_fail(tg_error *err, const char *what, VkResult r) {
    return tg_fail(err, "vulkan: %s failed (VkResult %d)", what, (int)r);
}

/* The layer's warnings and errors: printed and counted (the context is the messenger's user data). */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)type;
    tg_vk_ctx *c = user;
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        c->messages++;
        fprintf(stderr, "vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "(no message)");
    }
    return VK_FALSE;
}

static bool validation_wanted(void) {
    const char *v = getenv("TG_VULKAN_VALIDATE");
    return v && strcmp(v, "0") != 0 && *v;
}

static bool load(tg_vk_ctx *c, tg_error *err) {
    c->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib)
        return tg_fail(err, "vulkan: cannot load libvulkan.so.1 (install a Vulkan loader and driver, e.g. "
                            "libvulkan1 and mesa-vulkan-drivers)");
    *(void **)&c->get_proc = dlsym(c->lib, "vkGetInstanceProcAddr");
    return c->get_proc || tg_fail(err, "vulkan: libvulkan.so.1 has no vkGetInstanceProcAddr");
}

static bool create_instance(tg_vk_ctx *c, bool validate, tg_error *err) {
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)c->get_proc(NULL, "vkCreateInstance");
    if (!create) return tg_fail(err, "vulkan: the loader has no vkCreateInstance");
    const VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "tinygpt",
                                   .apiVersion = VK_API_VERSION_1_1};
    const char *layers[] = {VALIDATION_LAYER};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    const VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                                     .enabledLayerCount = validate ? 1 : 0, .ppEnabledLayerNames = layers,
                                     .enabledExtensionCount = validate ? 1 : 0, .ppEnabledExtensionNames = exts};
    VkResult r = create(&ci, NULL, &c->inst);
    if (r == VK_ERROR_LAYER_NOT_PRESENT || (validate && r == VK_ERROR_EXTENSION_NOT_PRESENT))
        return tg_fail(err, "vulkan: TG_VULKAN_VALIDATE is set but the validation layer %s is not installed "
                            "(vulkan-validationlayers)", VALIDATION_LAYER);
    if (r != VK_SUCCESS) return vk_fail(err, "vkCreateInstance (is a Vulkan driver installed?)", r);
#define TG_VK_LOAD(name)                                                                                              \
    if (!(c->f.name = (PFN_##name)c->get_proc(c->inst, #name))) return tg_fail(err, "vulkan: no entry point " #name);
    TG_VK_FUNCS(TG_VK_LOAD)
#undef TG_VK_LOAD
    if (!validate) return true;
    PFN_vkCreateDebugUtilsMessengerEXT make =
        (PFN_vkCreateDebugUtilsMessengerEXT)c->get_proc(c->inst, "vkCreateDebugUtilsMessengerEXT");
    c->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)c->get_proc(c->inst, "vkDestroyDebugUtilsMessengerEXT");
    if (!make || !c->destroy_messenger) return tg_fail(err, "vulkan: no debug messenger for the validation layer");
    const VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity =
            VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_message, .pUserData = c};
    r = make(c->inst, &mi, NULL, &c->messenger);
    return r == VK_SUCCESS || vk_fail(err, "vkCreateDebugUtilsMessengerEXT", r);
}

/* Physical device `index` with a compute queue. */
static bool pick_device(tg_vk_ctx *c, int index, tg_error *err) {
    uint32_t n = 0;
    VkResult r = c->f.vkEnumeratePhysicalDevices(c->inst, &n, NULL);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return vk_fail(err, "vkEnumeratePhysicalDevices", r);
    if (n == 0) return tg_fail(err, "vulkan: no Vulkan device found");
    VkPhysicalDevice *devs = calloc(n, sizeof *devs);
    if (!devs) return tg_fail(err, "out of memory");
    r = c->f.vkEnumeratePhysicalDevices(c->inst, &n, devs);
    if (index < 0 || (uint32_t)index >= n || (r != VK_SUCCESS && r != VK_INCOMPLETE)) {
        char list[512] = "";
        for (uint32_t i = 0; i < n && i < 8; i++) {
            VkPhysicalDeviceProperties p;
            c->f.vkGetPhysicalDeviceProperties(devs[i], &p);
            const size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%u = %s", i ? ", " : "", i, p.deviceName);
        }
        free(devs);
        return tg_fail(err, "vulkan: device %d does not exist (%u device%s: %s)", index, n, n == 1 ? "" : "s", list);
    }
    c->phys = devs[index];
    free(devs);
    VkPhysicalDeviceProperties props;
    c->f.vkGetPhysicalDeviceProperties(c->phys, &props);
    memcpy(c->device_name, props.deviceName, sizeof c->device_name);
    c->limits = props.limits;
    /* the matrix products reduce with subgroup arithmetic (shaders/matmul.comp) */
    PFN_vkGetPhysicalDeviceProperties2 props2 =
        (PFN_vkGetPhysicalDeviceProperties2)c->get_proc(c->inst, "vkGetPhysicalDeviceProperties2");
    VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sub};
    if (props2) props2(c->phys, &p2);
    if (!props2 || !(sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        !(sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) || sub.subgroupSize == 0 ||
        sub.subgroupSize > 64 || 64 % sub.subgroupSize != 0)
        return tg_fail(err, "vulkan: device %d (%s) lacks subgroup arithmetic in compute shaders with subgroups "
                            "dividing 64 (subgroup size %u)", index, c->device_name, sub.subgroupSize);
    c->subgroup_size = sub.subgroupSize;
    c->f.vkGetPhysicalDeviceMemoryProperties(c->phys, &c->mem_props);
    uint32_t nq = 0;
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16) nq = 16;
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, qf);
    for (uint32_t i = 0; i < nq; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            c->queue_family = i;
            c->timestamp_bits = qf[i].timestampValidBits;
            return true;
        }
    return tg_fail(err, "vulkan: device %d (%s) has no compute queue", index, c->device_name);
}

/* The device, its queue, the shared layouts, the command buffer and its fence. */
static bool create_device(tg_vk_ctx *c, tg_error *err) {
    const float prio = 1.0f;
    const VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                        .queueFamilyIndex = c->queue_family, .queueCount = 1,
                                        .pQueuePriorities = &prio};
    const VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                                   .pQueueCreateInfos = &qi};
    VkResult r = c->f.vkCreateDevice(c->phys, &di, NULL, &c->dev);
    if (r != VK_SUCCESS) return vk_fail(err, "vkCreateDevice", r);
    c->f.vkGetDeviceQueue(c->dev, c->queue_family, 0, &c->queue);
    VkDescriptorSetLayoutBinding b[TG_VK_BINDINGS];
    for (int i = 0; i < TG_VK_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    const VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                                .bindingCount = TG_VK_BINDINGS, .pBindings = b};
    if ((r = c->f.vkCreateDescriptorSetLayout(c->dev, &li, NULL, &c->set_layout)) != VK_SUCCESS)
        return vk_fail(err, "vkCreateDescriptorSetLayout", r);
    const VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = TG_VK_PUSH_BYTES};
    const VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                           .pSetLayouts = &c->set_layout, .pushConstantRangeCount = 1,
                                           .pPushConstantRanges = &pr};
    if ((r = c->f.vkCreatePipelineLayout(c->dev, &pi, NULL, &c->pipe_layout)) != VK_SUCCESS)
        return vk_fail(err, "vkCreatePipelineLayout", r);
    const VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                        .queueFamilyIndex = c->queue_family};
    if ((r = c->f.vkCreateCommandPool(c->dev, &ci, NULL, &c->cmd_pool)) != VK_SUCCESS)
        return vk_fail(err, "vkCreateCommandPool", r);
    const VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                            .commandPool = c->cmd_pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                            .commandBufferCount = 1};
    if ((r = c->f.vkAllocateCommandBuffers(c->dev, &ai, &c->cmd)) != VK_SUCCESS)
        return vk_fail(err, "vkAllocateCommandBuffers", r);
    const VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = c->f.vkCreateFence(c->dev, &fi, NULL, &c->fence)) != VK_SUCCESS) return vk_fail(err, "vkCreateFence", r);
    return true;
}

tg_vk_ctx *tg_vk_open(int index, tg_error *err) {
    tg_vk_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    if (load(c, err) && create_instance(c, validation_wanted(), err) && pick_device(c, index, err) &&
        create_device(c, err))
        return c;
    tg_vk_close(c);
    return NULL;
}

void tg_vk_close(tg_vk_ctx *c) {
    if (!c) return;
    if (c->dev) {
        tg_vk_buf_free(c, &c->staging);
        if (c->fence) c->f.vkDestroyFence(c->dev, c->fence, NULL);
        if (c->cmd_pool) c->f.vkDestroyCommandPool(c->dev, c->cmd_pool, NULL);
        if (c->pipe_layout) c->f.vkDestroyPipelineLayout(c->dev, c->pipe_layout, NULL);
        if (c->set_layout) c->f.vkDestroyDescriptorSetLayout(c->dev, c->set_layout, NULL);
        c->f.vkDestroyDevice(c->dev, NULL);
    }
    if (c->messenger) c->destroy_messenger(c->inst, c->messenger, NULL);
    if (c->inst) c->f.vkDestroyInstance(c->inst, NULL);
    /* the loader stays loaded (no dlclose): drivers keep threads and allocations past vkDestroyInstance (lavapipe's
     * LLVM), and unloading under them is unsafe; dlopen of it again only counts a reference */
    free(c);
}

/* A memory type of `bits` with every flag of `want`, preferring one with `prefer` and then one without `avoid`;
 * -1: none. */
static int memory_type(const tg_vk_ctx *c, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer,
                       VkMemoryPropertyFlags avoid) {
    int best = -1, best_score = -1;
    for (uint32_t i = 0; i < c->mem_props.memoryTypeCount; i++) {
        const VkMemoryPropertyFlags f = c->mem_props.memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & want) != want) continue;
        const int score = ((f & prefer) == prefer ? 2 : 0) + ((f & avoid) == 0 ? 1 : 0);
        if (score > best_score) best = (int)i, best_score = score;
    }
    return best;
}

static bool allocate(tg_vk_ctx *c, tg_vk_buf *b, const VkMemoryRequirements *req, int type) {
    const VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req->size,
                                     .memoryTypeIndex = (uint32_t)type};
    if (c->f.vkAllocateMemory(c->dev, &ai, NULL, &b->mem) == VK_SUCCESS) return true;
    b->mem = VK_NULL_HANDLE;
    return false;
}

bool tg_vk_buf_new(tg_vk_ctx *c, size_t bytes, tg_vk_mem mem, const char *what, tg_vk_buf *b, tg_error *err) {
    *b = (tg_vk_buf){0};
    if (bytes == 0) bytes = 4;
    if (bytes > c->limits.maxStorageBufferRange)
        return tg_fail(err, "vulkan: %s needs %zu bytes, more than device %s's storage buffer range (%u bytes)", what,
                       bytes, c->device_name, c->limits.maxStorageBufferRange);
    const VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                                   .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                   .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = c->f.vkCreateBuffer(c->dev, &bi, NULL, &b->buf);
    if (r != VK_SUCCESS) return vk_fail(err, "vkCreateBuffer", r);
    VkMemoryRequirements req;
    c->f.vkGetBufferMemoryRequirements(c->dev, b->buf, &req);
    const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    /* the kind's choice, then (a device-local, host-visible heap is often small) host-visible memory of any kind */
    const int first = mem == TG_VK_DEVICE   ? memory_type(c, req.memoryTypeBits, local, 0, host)
                      : mem == TG_VK_SHARED ? memory_type(c, req.memoryTypeBits, host, local, 0)
                                            : memory_type(c, req.memoryTypeBits, host,
                                                          VK_MEMORY_PROPERTY_HOST_CACHED_BIT, local);
    const int fallback = memory_type(c, req.memoryTypeBits, host, 0, local);
    if (first < 0 && fallback < 0)
        return tg_fail(err, "vulkan: device %s has no memory type for %s", c->device_name, what);
    if (!(first >= 0 && allocate(c, b, &req, first)) && !(fallback >= 0 && fallback != first &&
                                                          allocate(c, b, &req, fallback)))
        return tg_fail(err, "vulkan: out of device memory for %s (%zu bytes)", what, bytes);
    if ((r = c->f.vkBindBufferMemory(c->dev, b->buf, b->mem, 0)) != VK_SUCCESS)
        return vk_fail(err, "vkBindBufferMemory", r);
    if (mem != TG_VK_DEVICE && (r = c->f.vkMapMemory(c->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map)) != VK_SUCCESS)
        return vk_fail(err, "vkMapMemory", r);
    b->bytes = bytes;
    return true;
}

void tg_vk_buf_free(tg_vk_ctx *c, tg_vk_buf *b) {
    if (!c || !b) return;
    if (b->map) c->f.vkUnmapMemory(c->dev, b->mem);
    if (b->buf) c->f.vkDestroyBuffer(c->dev, b->buf, NULL);
    if (b->mem) c->f.vkFreeMemory(c->dev, b->mem, NULL);
    *b = (tg_vk_buf){0};
}

#define STAGING_MAX ((size_t)64 << 20)

bool tg_vk_upload(tg_vk_ctx *c, tg_vk_buf *dst, size_t at, const void *src, size_t bytes, tg_error *err) {
    if (at > dst->bytes || bytes > dst->bytes - at) return tg_fail(err, "vulkan: an upload past its buffer's end");
    const size_t want = bytes < STAGING_MAX ? bytes : STAGING_MAX;
    if (c->staging.bytes < want) {
        tg_vk_buf_free(c, &c->staging);
        if (!tg_vk_buf_new(c, want, TG_VK_READBACK, "the upload's staging buffer", &c->staging, err)) return false;
    }
    for (size_t done = 0; done < bytes;) {
        const size_t n = bytes - done < c->staging.bytes ? bytes - done : c->staging.bytes;
        memcpy(c->staging.map, (const uint8_t *)src + done, n);
        const VkBufferCopy region = {.srcOffset = 0, .dstOffset = at + done, .size = n};
        if (!tg_vk_begin(c, err)) return false;
        c->f.vkCmdCopyBuffer(c->cmd, c->staging.buf, dst->buf, 1, &region);
        const VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                    .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                    .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
        c->f.vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                                  &mb, 0, NULL, 0, NULL);
        if (!tg_vk_submit_wait(c, err)) return false;
        done += n;
    }
    return true;
}

void tg_vk_copy(tg_vk_ctx *c, const tg_vk_buf *src, const tg_vk_buf *dst, const VkBufferCopy *regions, uint32_t n) {
    if (n == 0) return;
    const VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                    .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
    c->f.vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                              &before, 0, NULL, 0, NULL);
    c->f.vkCmdCopyBuffer(c->cmd, src->buf, dst->buf, n, regions);
    const VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                   .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                   .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                                                    VK_ACCESS_SHADER_WRITE_BIT};
    c->f.vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0, NULL,
                              0, NULL);
}

VkPipeline tg_vk_pipeline(tg_vk_ctx *c, const char *name, tg_error *err) {
    const tg_vk_shader *sh = NULL;
    for (int i = 0; i < tg_vk_n_shaders; i++)
        if (strcmp(tg_vk_shaders[i].name, name) == 0) sh = &tg_vk_shaders[i];
    if (!sh) {
        tg_fail(err, "vulkan: no shader named %s in this build", name);
        return VK_NULL_HANDLE;
    }
    const VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = sh->bytes,
                                         .pCode = sh->code};
    VkShaderModule mod;
    VkResult r = c->f.vkCreateShaderModule(c->dev, &mi, NULL, &mod);
    if (r != VK_SUCCESS) {
        vk_fail(err, "vkCreateShaderModule", r);
        return VK_NULL_HANDLE;
    }
    const VkComputePipelineCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod, .pName = "main"},
        .layout = c->pipe_layout};
    VkPipeline pl = VK_NULL_HANDLE;
    r = c->f.vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &pi, NULL, &pl);
    c->f.vkDestroyShaderModule(c->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        tg_fail(err, "vulkan: the driver refused shader %s (VkResult %d)", name, (int)r);
        return VK_NULL_HANDLE;
    }
    return pl;
}

bool tg_vk_begin(tg_vk_ctx *c, tg_error *err) {
    VkResult r = c->f.vkResetCommandBuffer(c->cmd, 0);
    if (r != VK_SUCCESS) return vk_fail(err, "vkResetCommandBuffer", r);
    const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                         .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = c->f.vkBeginCommandBuffer(c->cmd, &bi);
    return r == VK_SUCCESS || vk_fail(err, "vkBeginCommandBuffer", r);
}

bool tg_vk_submit_wait(tg_vk_ctx *c, tg_error *err) {
    VkResult r = c->f.vkEndCommandBuffer(c->cmd);
    if (r != VK_SUCCESS) return vk_fail(err, "vkEndCommandBuffer", r);
    const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                             .pCommandBuffers = &c->cmd};
    if ((r = c->f.vkQueueSubmit(c->queue, 1, &si, c->fence)) != VK_SUCCESS) return vk_fail(err, "vkQueueSubmit", r);
    r = c->f.vkWaitForFences(c->dev, 1, &c->fence, VK_TRUE, UINT64_MAX);
    const VkResult r2 = c->f.vkResetFences(c->dev, 1, &c->fence);
    if (r != VK_SUCCESS) return vk_fail(err, "vkWaitForFences", r);
    return r2 == VK_SUCCESS || vk_fail(err, "vkResetFences", r2);
}

void tg_vk_dispatch_free(tg_vk_ctx *c, VkPipeline pl, VkDescriptorSet set, const void *push, size_t push_bytes,
                         uint32_t gx, uint32_t gy, uint32_t gz) {
    c->f.vkCmdBindPipeline(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl);
    c->f.vkCmdBindDescriptorSets(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipe_layout, 0, 1, &set, 0, NULL);
    c->f.vkCmdPushConstants(c->cmd, c->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)push_bytes, push);
    c->f.vkCmdDispatch(c->cmd, gx, gy, gz);
}

void tg_vk_dispatch(tg_vk_ctx *c, VkPipeline pl, VkDescriptorSet set, const void *push, size_t push_bytes,
                    uint32_t gx, uint32_t gy, uint32_t gz) {
    tg_vk_dispatch_free(c, pl, set, push, push_bytes, gx, gy, gz);
    tg_vk_barrier(c);
}

void tg_vk_barrier(tg_vk_ctx *c) {
    const VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                                 VK_ACCESS_HOST_READ_BIT};
    c->f.vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                              NULL);
}

int tg_vk_messages(const tg_vk_ctx *c) { return c ? c->messages : 0; }
