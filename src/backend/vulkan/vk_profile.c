/* vk_profile.c — vk_profile.h's timestamps and table. */
#include "backend/vulkan/vk_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[PR_COUNT] = {
    "embed", "rms norm", "matmul q/k/v", "matmul attn out", "matmul gate/up", "matmul down", "matmul logits",
    "rope + kv append", "attention", "glu", "residual add", "readback copy"};

struct tg_vk_profile {
    VkQueryPool pool;
    uint32_t max_q, n_q;
    tg_vk_prof_kind *kinds; /* [max_q] the kind ending at query i */
    uint64_t *stamps;       /* [max_q] */
    double gpu_ns[PR_COUNT];
    long count[PR_COUNT];
    double host_s, gpu_total_ns;
    long submissions;
};

tg_vk_profile *tg_vk_profile_new(tg_vk_ctx *c, int max_marks) {
    const char *v = getenv("TG_VULKAN_PROFILE");
    if (!v || !*v || strcmp(v, "0") == 0) return NULL;
    if (c->timestamp_bits == 0) {
        fprintf(stderr, "vulkan profile: device %s's compute queue has no timestamps\n", c->device_name);
        return NULL;
    }
    tg_vk_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->max_q = (uint32_t)max_marks + 1;
    p->kinds = calloc(p->max_q, sizeof *p->kinds);
    p->stamps = calloc(p->max_q, sizeof *p->stamps);
    const VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                      .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = p->max_q};
    if (!p->kinds || !p->stamps || c->f.vkCreateQueryPool(c->dev, &qi, NULL, &p->pool) != VK_SUCCESS) {
        free(p->kinds);
        free(p->stamps);
        free(p);
        return NULL;
    }
    return p;
}

void tg_vk_profile_begin(tg_vk_profile *p, tg_vk_ctx *c) {
    if (!p) return;
    c->f.vkCmdResetQueryPool(c->cmd, p->pool, 0, p->max_q);
    c->f.vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, 0);
    p->n_q = 1;
}

void tg_vk_profile_mark(tg_vk_profile *p, tg_vk_ctx *c, tg_vk_prof_kind k) {
    if (!p || p->n_q >= p->max_q) return;
    p->kinds[p->n_q] = k;
    c->f.vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, p->n_q++);
}

void tg_vk_profile_end(tg_vk_profile *p, tg_vk_ctx *c, double host_s) {
    if (!p || p->n_q < 2) return;
    if (c->f.vkGetQueryPoolResults(c->dev, p->pool, 0, p->n_q, (size_t)p->n_q * 8, p->stamps, 8,
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
        return;
    const uint64_t mask = c->timestamp_bits >= 64 ? ~0ull : (1ull << c->timestamp_bits) - 1;
    const double period = c->limits.timestampPeriod;
    for (uint32_t i = 1; i < p->n_q; i++) {
        const double ns = (double)((p->stamps[i] - p->stamps[i - 1]) & mask) * period;
        p->gpu_ns[p->kinds[i]] += ns;
        p->count[p->kinds[i]]++;
        p->gpu_total_ns += ns;
    }
    p->host_s += host_s;
    p->submissions++;
}

void tg_vk_profile_free(tg_vk_profile *p, tg_vk_ctx *c) {
    if (!p) return;
    if (p->submissions > 0) {
        fprintf(stderr, "vulkan profile (%s): %ld submissions, GPU %.3f ms per submission, host wall %.3f ms per "
                        "call\n", c->device_name, p->submissions, p->gpu_total_ns / 1e6 / (double)p->submissions,
                p->host_s * 1e3 / (double)p->submissions);
        fprintf(stderr, "  %-18s %12s %10s %12s %7s\n", "operation", "GPU ms", "count", "us each", "share");
        for (int k = 0; k < PR_COUNT; k++)
            if (p->count[k] > 0)
                fprintf(stderr, "  %-18s %12.3f %10ld %12.2f %6.1f%%\n", kind_names[k], p->gpu_ns[k] / 1e6,
                        p->count[k], p->gpu_ns[k] / 1e3 / (double)p->count[k],
                        100.0 * p->gpu_ns[k] / (p->gpu_total_ns > 0 ? p->gpu_total_ns : 1));
    }
    c->f.vkDestroyQueryPool(c->dev, p->pool, NULL);
    free(p->kinds);
    free(p->stamps);
    free(p);
}
