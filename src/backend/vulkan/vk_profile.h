/* vk_profile.h — where a Vulkan call's time goes, when TG_VULKAN_PROFILE=1: a timestamp after each recorded
 * operation, the GPU time summed per kind of operation (the matrix products by their place in a layer) beside the
 * host's wall time per submission, printed on stderr as a table when the backend is destroyed. A tool for finding
 * what to speed up on a GPU (bench/device), never read by a test. */
#ifndef TG_BACKEND_VULKAN_VK_PROFILE_H
#define TG_BACKEND_VULKAN_VK_PROFILE_H

#include "backend/vulkan/vk_ctx.h"

typedef enum { PR_EMBED, PR_NORM, PR_MM_QKV, PR_MM_OUT, PR_MM_GATE_UP, PR_MM_DOWN, PR_MM_LOGITS, PR_ROPE_APPEND,
               PR_ATTEND, PR_GLU, PR_ADD, PR_READBACK, PR_COUNT } tg_vk_prof_kind;

typedef struct tg_vk_profile tg_vk_profile;

/* A profile of submissions of up to max_marks operations; NULL when TG_VULKAN_PROFILE is not set, or the queue has no
 * timestamps (said on stderr). */
tg_vk_profile *tg_vk_profile_new(tg_vk_ctx *c, int max_marks);
/* In a recording: the submission's start, then a mark after each operation of kind k. */
void tg_vk_profile_begin(tg_vk_profile *p, tg_vk_ctx *c);
void tg_vk_profile_mark(tg_vk_profile *p, tg_vk_ctx *c, tg_vk_prof_kind k);
/* After the submission was waited for: its times added, with host_s the host's seconds for the whole call. */
void tg_vk_profile_end(tg_vk_profile *p, tg_vk_ctx *c, double host_s);
/* Prints the table and frees p (NULL: nothing). */
void tg_vk_profile_free(tg_vk_profile *p, tg_vk_ctx *c);

#endif
