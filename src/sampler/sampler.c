/* sampler.c — turns one row of logits into a token id: greedy at temperature 0, otherwise softmax(logits / T)
 * restricted by top-k and then top-p (nucleus), drawn with a seeded PRNG that lives in the sampler.
 *
 * Defined behaviour for non-finite logits: NaN and -inf are never drawn (nor picked by greedy). If any scaled logit
 * is +inf, the distribution is the limit of the softmax: uniform over the +inf entries. When no logit is drawable
 * at all, tg_sampler_sample returns -1.
 *
 * Candidate selection uses a binary max-heap over the drawable ids, ordered by (scaled logit desc, id asc): building
 * it is O(V) and each pop O(log V), so top-k costs O(V + k log V) and top-p pops only the nucleus instead of sorting
 * the whole vocabulary. All buffers are allocated once in tg_sampler_new.
 *
 * The repeat penalty (llama.cpp's semantics) works on a copy of the logits: each distinct id among the last
 * repeat_last_n accepted tokens (a ring) has its logit divided by the penalty when positive, multiplied when not.
 * min-p (also llama.cpp's, before temperature) drops ids whose logit is below max + ln(min_p). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler_state.h"
#include "util/free_all.h"
#include "tinygpt.h"
#include "util/error.h"

struct tg_sampler {
    tg_sampler_params p;
    int32_t vocab;
    float *z;         /* [vocab] scaled logits of the current call */
    int32_t *heap;    /* [vocab] max-heap of drawable ids */
    int32_t *kept;    /* [vocab] ids popped from the heap, highest first */
    double *weight;   /* [vocab] exp(z - zmax) of kept[i] */
    uint64_t rng[4];  /* xoshiro256** state */
    float *penalized; /* [vocab] the logits after the repeat penalty (only with a penalty) */
    unsigned char *seen; /* [vocab] marks of the ids already penalised in this call (only with a penalty) */
    int32_t *recent;  /* [repeat_last_n] ring of the latest accepted ids */
    size_t n_recent, next_recent;
};

static bool penalty_on(const tg_sampler_params *p) {
    return p->repeat_penalty > 0.0f && p->repeat_penalty != 1.0f && p->repeat_last_n > 0;
}

/* ---- PRNG: xoshiro256** seeded through splitmix64 (Blackman & Vigna) ---------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform double in [0, 1) with 53 random bits. */
static double uniform01(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

/* The PRNG state of a fresh sampler: xoshiro256** seeded from p.seed through splitmix64. */
static void seed_rng(tg_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

/* ---- public API --------------------------------------------------------------------------------------------- */

tg_sampler_params tg_sampler_default_params(void) {
    tg_sampler_params p = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 0, .repeat_penalty = 1.0f,
                           .repeat_last_n = 64, .min_p = 0.0f};
    return p;
}

/* NULL after filling err: the sampler's failures all end here. */
static tg_sampler *refuse(tg_error *err, const char *what) {
    tg_fail(err, "sampler: %s", what);
    return NULL;
}

tg_sampler *tg_sampler_new(const tg_sampler_params *p, int32_t vocab_size, tg_error *err) {
    if (!p) return refuse(err, "no parameters");
    if (vocab_size <= 0) return refuse(err, "the vocabulary is empty");
    if (!(p->temperature >= 0.0f) || isinf(p->temperature)) /* rejects NaN too */
        return refuse(err, "the temperature must be a finite number >= 0");
    if (p->top_k < 0) return refuse(err, "top-k must be >= 0");
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f)) return refuse(err, "top-p must be in [0, 1]");
    if (!(p->repeat_penalty >= 0.0f) || isinf(p->repeat_penalty))
        return refuse(err, "the repeat penalty must be a finite number >= 0");
    if (p->repeat_last_n < 0 || p->repeat_last_n > TG_SAMPLER_MAX_LAST_N)
        return refuse(err, "repeat-last-n must be in 0..1048576");
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) return refuse(err, "min-p must be in [0, 1]");
    tg_sampler *s = calloc(1, sizeof *s);
    if (!s) return refuse(err, "out of memory");
    s->p = *p;
    s->vocab = vocab_size;
    size_t n = (size_t)vocab_size;
    s->z = malloc(n * sizeof *s->z);
    s->heap = malloc(n * sizeof *s->heap);
    s->kept = malloc(n * sizeof *s->kept);
    s->weight = malloc(n * sizeof *s->weight);
    if (penalty_on(p)) {
        s->penalized = malloc(n * sizeof *s->penalized);
        s->seen = calloc(n, 1);
        s->recent = malloc((size_t)p->repeat_last_n * sizeof *s->recent);
    }
    if (!s->z || !s->heap || !s->kept || !s->weight ||
        (penalty_on(p) && (!s->penalized || !s->seen || !s->recent))) {
        tg_sampler_free(s);
        return refuse(err, "out of memory");
    }
    seed_rng(s);
    return s;
}

void tg_sampler_free(tg_sampler *s) {
    if (!s) return;
    TG_FREE_ALL(s->z, s->heap, s->kept, s->weight, s->penalized, s->seen, s->recent, s);
}

/* Greedy: the highest logit, ties to the lowest id; NaN is skipped, -inf only counts as "not drawable". */
static int32_t argmax(const float *logits, int32_t n) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++) {
        float v = logits[i];
        if (isnan(v) || v == -INFINITY) continue;
        if (best < 0 || v > logits[best]) best = i;
    }
    return best;
}

/* Heap order: a is "above" b when its scaled logit is larger, or equal with a smaller id. */
static int above(const float *z, int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); }

static void sift_down(const float *z, int32_t *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && above(z, h[l], h[top])) top = l;
        if (r < n && above(z, h[r], h[top])) top = r;
        if (top == i) return;
        int32_t t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

static int32_t heap_pop(const float *z, int32_t *h, size_t *n) {
    int32_t top = h[0];
    h[0] = h[--*n];
    if (*n > 0) sift_down(z, h, *n, 0);
    return top;
}

void tg_sampler_reset(tg_sampler *s) {
    if (!s) return;
    seed_rng(s);
    s->n_recent = s->next_recent = 0;
}

void tg_sampler_accept(tg_sampler *s, int32_t id) {
    if (!s || !s->recent || id < 0 || id >= s->vocab) return;
    const size_t cap = (size_t)s->p.repeat_last_n;
    s->recent[s->next_recent] = id;
    s->next_recent = (s->next_recent + 1) % cap;
    if (s->n_recent < cap) s->n_recent++;
}

/* The logits with the repeat penalty applied (a copy), or logits itself without one. */
static const float *apply_penalty(tg_sampler *s, const float *logits) {
    if (!s->recent || s->n_recent == 0) return logits;
    memcpy(s->penalized, logits, (size_t)s->vocab * sizeof *logits);
    const float pen = s->p.repeat_penalty;
    for (size_t i = 0; i < s->n_recent; i++) {
        const int32_t id = s->recent[i];
        if (s->seen[id]) continue;
        s->seen[id] = 1;
        float v = s->penalized[id];
        s->penalized[id] = v > 0.0f ? v / pen : v * pen; /* NaN and +-inf stay what they are */
    }
    for (size_t i = 0; i < s->n_recent; i++) s->seen[s->recent[i]] = 0;
    return s->penalized;
}

/* The lowest logit min-p keeps: max + ln(min_p) over the finite logits; -inf when min-p is off or a logit is +inf. */
static float min_p_floor(const tg_sampler *s, const float *logits) {
    if (s->p.min_p <= 0.0f) return -INFINITY;
    float top = -INFINITY;
    for (int32_t i = 0; i < s->vocab; i++)
        if (!isnan(logits[i]) && logits[i] > top) top = logits[i];
    if (isinf(top)) return -INFINITY;
    return top + logf(s->p.min_p);
}

static int32_t sample_from(tg_sampler *s, const float *logits);

int32_t tg_sampler_sample(tg_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    const int32_t id = sample_from(s, apply_penalty(s, logits));
    if (id >= 0) tg_sampler_accept(s, id);
    return id;
}

static int32_t sample_from(tg_sampler *s, const float *logits) {
    if (s->p.temperature <= 0.0f) return argmax(logits, s->vocab);
    const float floor_logit = min_p_floor(s, logits);

    /* Scale and collect drawable ids; +inf after scaling wins outright (uniform over those). */
    const float inv_t = 1.0f / s->p.temperature;
    size_t n = 0, n_pinf = 0;
    for (int32_t i = 0; i < s->vocab; i++) {
        float v = logits[i];
        if (isnan(v) || v == -INFINITY || v < floor_logit) continue;
        float z = v * inv_t;
        if (z == INFINITY) n_pinf++;
        s->z[i] = z;
        s->heap[n++] = i;
    }
    if (n == 0) return -1;
    if (n_pinf > 0) {
        size_t m = 0;
        for (size_t j = 0; j < n; j++) {
            int32_t id = s->heap[j];
            if (s->z[id] == INFINITY) {
                s->z[id] = 0.0f;
                s->heap[m++] = id;
            }
        }
        n = m;
    }
    for (size_t i = n / 2; i-- > 0;) sift_down(s->z, s->heap, n, i);

    /* top-k: pop the k best (all when off); their weights relative to the best one. */
    size_t k = n;
    if (s->p.top_k > 0 && (size_t)s->p.top_k < n) k = (size_t)s->p.top_k;
    const bool nucleus = s->p.top_p < 1.0f;
    double total = 0.0;
    size_t n_kept = 0;
    size_t heap_n = n;
    const float zmax = s->z[s->heap[0]];
    if (nucleus && k == n) {
        /* No top-k bound: the normaliser is the sum over every drawable id, then pop only the nucleus. */
        for (size_t j = 0; j < n; j++) total += exp((double)s->z[s->heap[j]] - (double)zmax);
        const double target = (double)s->p.top_p * total;
        double cum = 0.0;
        while (heap_n > 0) {
            int32_t id = heap_pop(s->z, s->heap, &heap_n);
            double w = exp((double)s->z[id] - (double)zmax);
            s->kept[n_kept] = id;
            s->weight[n_kept++] = w;
            cum += w;
            if (cum >= target) break;
        }
        total = cum;
    } else {
        for (size_t j = 0; j < k; j++) {
            int32_t id = heap_pop(s->z, s->heap, &heap_n);
            double w = exp((double)s->z[id] - (double)zmax);
            s->kept[n_kept] = id;
            s->weight[n_kept++] = w;
            total += w;
        }
        if (nucleus) {
            /* top-p over the top-k distribution: the smallest prefix whose mass reaches p (at least one id). */
            const double target = (double)s->p.top_p * total;
            double cum = 0.0;
            size_t keep = 0;
            while (keep < n_kept) {
                cum += s->weight[keep++];
                if (cum >= target) break;
            }
            n_kept = keep;
            total = cum;
        }
    }

    const double r = uniform01(s->rng) * total;
    double cum = 0.0;
    for (size_t j = 0; j < n_kept; j++) {
        cum += s->weight[j];
        if (r < cum) return s->kept[j];
    }
    return s->kept[n_kept - 1]; /* r landed on the rounding slack at the very top */
}

/* ---- state for session snapshots (sampler_state.h) ------------------------------------------------------------ */

int32_t tg_sampler_vocab(const tg_sampler *s) { return s ? s->vocab : 0; }

size_t tg_sampler_history_cap(const tg_sampler *s) { return s && s->recent ? (size_t)s->p.repeat_last_n : 0; }

size_t tg_sampler_get_state(const tg_sampler *s, uint64_t rng[4], int32_t *hist) {
    memcpy(rng, s->rng, sizeof s->rng);
    if (!s->recent) return 0;
    const size_t cap = (size_t)s->p.repeat_last_n;
    const size_t oldest = s->n_recent < cap ? 0 : s->next_recent;
    for (size_t i = 0; i < s->n_recent; i++) hist[i] = s->recent[(oldest + i) % cap];
    return s->n_recent;
}

void tg_sampler_set_state(tg_sampler *s, const uint64_t rng[4], const int32_t *hist, size_t n) {
    s->n_recent = s->next_recent = 0;
    for (size_t i = 0; i < n; i++) tg_sampler_accept(s, hist[i]);
    memcpy(s->rng, rng, sizeof s->rng);
}
