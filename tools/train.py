#!/usr/bin/env python3
"""Trains tinygpt's bundled model (issue #3) on the Debian-packaged corpus (runs on the GPU machine).

Responsibility: tokenizer (byte-level BPE, GPT-2 regex, so llama.cpp's "gpt-2" pre-type matches it) -> Llama model
-> training with AdamW, warm-up + cosine, bf16 autocast, periodic validation and best-checkpoint selection ->
Hugging Face folder (fp32 save_pretrained + tokenizer files) -> GGUF via tools/export_gguf.py -> golden greedy
continuations (fp32, CPU, eager attention) and sample generations.

The architecture is chosen by --arch through build_model(): "llama" (the bundled flagship) or "yoco" (issue #7,
docs/yoco.md: the upper half of the layers read the K/V of layer L/2-1; tools/yoco_ref.py). A YOCO run reuses the
whole pipeline (data, optimiser, schedule, evaluation) and differs only in the model and in what it writes at the
end (finish_yoco): pass --tokenizer models/flagship-hf/tokenizer.json so it shares the flagship's vocabulary and its
perplexities are comparable. Its goldens (<name>-golden.json, <name>-logits-*.f32, <name>-greedy.json) are computed
in fp32 on the GPU (TF32 off) from the weights as saved, both as trained and rounded to fp16 as the F16 GGUF holds
them.

Outputs in --out: hf/ (config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
generation_config.json), <name>.gguf, loss.csv (step, tokens, epoch, lr, train_loss, val_loss, seconds),
metrics.json, flagship-greedy.json ([{prompt, prompt_ids, continuation_ids, text}]), flagship-tokenization.json
([{text, ids}]), samples.json.

Usage: tools/train.py --corpus tools/.corpus --valid models/data/valid.txt --long models/data/long-heldout.txt
                      --out OUT [--max-epochs 6] [--time-budget 300] [--tokenizer tokenizer.json] [shape flags]
The defaults are the shipped model's settings (models/README.md); it runs on one GPU in about 3 minutes.
"""
import argparse
import csv
import inspect
import json
import math
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig, LlamaForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
import export_gguf  # noqa: E402
import lm_common  # noqa: E402
import yoco_ref  # noqa: E402

EOS_ID = 0  # <|endoftext|>
DEVICE = "cuda"  # of the YOCO self-check and goldens (a dry run of those parts on a CPU sets it to "cpu")
GREEDY_PROMPTS = [
    "It is a truth universally acknowledged, that",
    "Blessed is the man that",
    "A hacker is a person who",
    "\"My dear Emma,\" said Mr. Knightley,",
]
SAMPLE_PROMPTS = ["Mr. Darcy", "The heavens declare", "A computer"]
# the YOCO golden prompt: its first GOLDEN_TOKENS ids
GOLDEN_TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
               "want of a wife. However little known the feelings or views of such a man may be on his first entering "
               "a neighbourhood, this truth is so well fixed in the minds of the surrounding families")
GOLDEN_TOKENS = 40
GOLDEN_CONTINUATION = 64


def log(*a):
    print("[train]", *a, flush=True)


def llama_config(args, vocab_size):
    """transformers' LlamaConfig of the shape flags."""
    rope = {"rope_parameters": {"rope_type": "default", "rope_theta": args.theta}} \
        if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters else {"rope_theta": args.theta}
    return LlamaConfig(vocab_size=vocab_size, hidden_size=args.hidden, intermediate_size=args.inter,
                       num_hidden_layers=args.layers, num_attention_heads=args.heads,
                       num_key_value_heads=args.kv_heads, head_dim=args.hidden // args.heads,
                       max_position_embeddings=args.ctx, rms_norm_eps=args.eps, tie_word_embeddings=True,
                       hidden_act="silu", attention_bias=False, mlp_bias=False, initializer_range=0.02,
                       bos_token_id=EOS_ID, eos_token_id=EOS_ID, pad_token_id=None, **rope)


def yoco_config(args, vocab_size):
    """The YOCO model's config.json (dict) for the shape flags."""
    shape = {k: getattr(args, k) for k in ("layers", "hidden", "heads", "kv_heads", "inter", "ctx", "theta", "eps")}
    return yoco_ref.hf_config(shape, vocab_size, yoco_ref.kv_source_for(args.layers), EOS_ID, EOS_ID)


def build_model(args, vocab_size):
    """The model named by --arch, freshly initialised (--seed): transformers' LlamaForCausalLM, or for "yoco" the
    same with the sharing layers' attention replaced (yoco_ref.build_hf_yoco)."""
    config = llama_config(args, vocab_size)
    torch.manual_seed(args.seed)
    if args.arch == "llama":
        return LlamaForCausalLM(config)
    if args.arch == "yoco":
        return yoco_ref.build_hf_yoco(config, yoco_ref.kv_source_for(args.layers))
    raise ValueError(f"unknown --arch {args.arch}")


def fresh_yoco(impl, args, vocab_size):
    """An untrained YOCO model of implementation impl ("transformers" or "naive"), for loading saved weights."""
    if impl == "transformers":
        return yoco_ref.build_hf_yoco(llama_config(args, vocab_size), yoco_ref.kv_source_for(args.layers))
    return yoco_ref.NaiveYoco(yoco_config(args, vocab_size))


def probe_state(state, seed=5):
    """Weights for a self-check: the matrices scaled up (so attention is far from uniform and a wiring mistake
    shows), the norms spread around 1."""
    rng = np.random.default_rng(seed)
    return {k: (v * 5.0 if v.ndim >= 2 else 1.0 + 0.3 * rng.uniform(-1, 1, v.shape)).astype(np.float32)
            for k, v in state.items()}


def build_yoco_checked(args, vocab_size):
    """(model, impl, check): the transformers-based YOCO model, after a self-check against the independent NaiveYoco
    (same probe weights, fp32 on the GPU, TF32 off: max |logit difference| must stay below 1e-3 of the logits'
    range). If it cannot be built, fails to run, or disagrees, NaiveYoco (seeded the same way) is trained instead, and
    the log says so."""
    kv = yoco_ref.kv_source_for(args.layers)
    model = None
    try:
        model = build_model(args, vocab_size)
        state = probe_state(yoco_ref.export_state(model, kv))
        probe = yoco_ref.load_weights(fresh_yoco("transformers", args, vocab_size), state).to(DEVICE).eval()
        naive = yoco_ref.load_weights(fresh_yoco("naive", args, vocab_size), state).to(DEVICE).eval()
        gen = torch.Generator(device="cpu").manual_seed(3)
        ids = torch.randint(0, vocab_size, (2, 128), generator=gen).to(DEVICE)
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.no_grad():
            span = float(naive(input_ids=ids).logits.float().abs().max())
        diff = yoco_ref.cross_check(probe, naive, ids)
        torch.backends.cuda.matmul.allow_tf32 = True
        del probe, naive
        check = {"probe_max_abs_logit": round(span, 4), "max_abs_diff": diff}
        log(f"self-check: transformers-based YOCO vs NaiveYoco: max |logit diff| {diff:.3g} (logits up to "
            f"{span:.3g})")
        if not diff <= 1e-3 * max(1.0, span):
            raise RuntimeError(f"the two YOCO implementations disagree by {diff:.3g}")
        return model, "transformers", check
    except Exception as e:  # the one GPU run must still produce a model: fall back to the plain implementation
        traceback.print_exc()
        log(f"FALLBACK: training NaiveYoco instead of the transformers-based model ({type(e).__name__}: {e})")
        torch.backends.cuda.matmul.allow_tf32 = True
        return (yoco_ref.NaiveYoco(yoco_config(args, vocab_size), seed=args.seed), "naive",
                {"error": f"{type(e).__name__}: {e}"})


def windows(stream, ctx):
    """Non-overlapping (input, target) windows of length ctx covering a 1-D token tensor."""
    n = (stream.numel() - 1) // ctx
    x = stream[:n * ctx].view(n, ctx)
    y = stream[1:n * ctx + 1].view(n, ctx)
    return x, y


@torch.no_grad()
def evaluate(model, stream, ctx, max_windows=None, bf16=True, batch=32):
    """Mean next-token cross-entropy (nats) over non-overlapping ctx-token windows; returns (loss, tokens)."""
    model.eval()
    x, y = windows(stream, ctx)
    if max_windows is not None:
        x, y = x[:max_windows], y[:max_windows]
    total, count = 0.0, 0
    for i in range(0, x.shape[0], batch):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16 and x.is_cuda):
            logits = model(input_ids=x[i:i + batch]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y[i:i + batch].reshape(-1),
                               reduction="sum")
        total += float(loss)
        count += y[i:i + batch].numel()
    model.train()
    return total / max(count, 1), count


def lr_at(step, total, args):
    """Linear warm-up, then cosine from --lr down to --lr * --min-lr-frac at step `total`."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    p = min(1.0, (step - args.warmup) / max(1, total - args.warmup))
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def train(args, model, train_stream, val_stream, out):
    """The training loop; returns a dict of what happened. Keeps the best validation checkpoint in `model`."""
    device = "cuda"
    model.to(device).train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    batches = lm_common.Batches(train_stream, args.ctx, args.batch, device, seed=args.seed,
                                first=EOS_ID if args.bos_first else None)
    tokens_per_step = args.batch * args.ctx
    epoch_cap = int(args.max_epochs * train_stream.size / tokens_per_step)
    total = epoch_cap
    val_t = torch.from_numpy(val_stream.astype(np.int64)).to(device)
    clock = lm_common.Timer()
    rows = []
    best = (float("inf"), -1)
    best_state = None
    run_loss, run_n = 0.0, 0
    step = 0
    t_measure = None
    while step < total:
        if step == 20:
            torch.cuda.synchronize()
            t_measure = clock()
        if step in (120, 250) and t_measure is not None:
            torch.cuda.synchronize()
            per_step = (clock() - t_measure) / (step - 20)
            total = max(step + 1, min(epoch_cap, step + int((args.time_budget - clock()) / per_step)))
            log(f"step {step}: {per_step * 1000:.1f} ms/step, {tokens_per_step / per_step / 1e6:.2f} M tok/s, "
                f"planning {total} steps ({total * tokens_per_step / train_stream.size:.1f} epochs)")
        lr = lr_at(step, total, args)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batches.next()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        step += 1
        run_loss += float(loss.detach()) if step % 10 == 0 else 0.0
        run_n += 1 if step % 10 == 0 else 0
        last = step == total or clock() > args.time_budget + 30
        if step % args.log_every == 0 or step % args.eval_every == 0 or last:
            row = {"step": step, "tokens": step * tokens_per_step,
                   "epoch": round(step * tokens_per_step / train_stream.size, 3), "lr": f"{lr:.3e}",
                   "train_loss": f"{run_loss / run_n:.4f}" if run_n else "", "val_loss": "",
                   "seconds": round(clock(), 1)}
            run_loss, run_n = 0.0, 0
            if step % args.eval_every == 0 or last:
                v, _ = evaluate(model, val_t, args.ctx, args.eval_windows or None)
                row["val_loss"] = f"{v:.4f}"
                if v < best[0]:
                    best = (v, step)
                    best_state = {k: t.detach().clone() for k, t in model.state_dict().items()}
                log(f"step {step} epoch {row['epoch']} lr {lr:.2e} train {row['train_loss']} val {v:.4f} "
                    f"({clock():.0f}s)")
            rows.append(row)
        if last:
            break
    torch.cuda.synchronize()
    seconds = clock()
    with open(out / "loss.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    if best_state is not None:
        model.load_state_dict(best_state)
    return {"steps": step, "planned_steps": total, "seconds": round(seconds, 1), "tokens_per_step": tokens_per_step,
            "epochs": round(step * tokens_per_step / train_stream.size, 2), "best_val_subset_loss": round(best[0], 4),
            "best_step": best[1]}


@torch.no_grad()
def greedy_goldens(model, tok):
    """64-token greedy continuations with generate(do_sample=False), checked against a plain argmax loop."""
    out = []
    for prompt in GREEDY_PROMPTS:
        ids = tok.encode(prompt, add_special_tokens=False).ids
        inp = torch.tensor([ids])
        gen = model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), max_new_tokens=64,
                             do_sample=False, pad_token_id=EOS_ID)[0, len(ids):].tolist()
        seq = list(ids)
        for t in gen:
            nxt = int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax())
            if nxt != t:
                log(f"WARNING: generate() and argmax loop differ for {prompt!r}")
                break
            seq.append(nxt)
        out.append({"prompt": prompt, "prompt_ids": ids, "continuation_ids": gen,
                    "text": tok.decode(gen, skip_special_tokens=False)})
    return out


@torch.no_grad()
def samples(model, tok, seed=42):
    out = []
    for i, prompt in enumerate(SAMPLE_PROMPTS):
        torch.manual_seed(seed + i)
        ids = tok.encode(prompt, add_special_tokens=False).ids
        inp = torch.tensor([ids])
        gen = model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), max_new_tokens=96, do_sample=True,
                             temperature=0.8, top_k=40, top_p=1.0, pad_token_id=EOS_ID)[0, len(ids):].tolist()
        out.append({"prompt": prompt, "settings": "temperature 0.8, top-k 40, seed %d, 96 tokens" % (seed + i),
                    "text": prompt + tok.decode(gen, skip_special_tokens=True)})
    return out


def tokenization_golden(tok, valid_text, long_text):
    """transformers-side ids (tokenizers library, no special tokens added) for the shared test strings, a chat
    snippet with special tokens, and a few long held-out passages; llama.cpp's ids are compared with these."""
    texts = lm_common.TOKENIZATION_STRINGS + ["<|im_start|>user\nHi there<|im_end|>\n<|endoftext|>"]
    paras = [p for p in valid_text.split("\n\n") if len(p) > 200]
    texts += paras[::max(1, len(paras) // 8)][:8] + [long_text[:4000]]
    return [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in texts]


@torch.no_grad()
def argmax_continuation(model, prompt_ids, n):
    """n greedy tokens after prompt_ids, recomputing the whole sequence each step (no cache); returns (ids, the
    smallest gap between the top two logits on the way)."""
    dev = next(model.parameters()).device
    seq, gap = list(prompt_ids), float("inf")
    for _ in range(n):
        logits = model(input_ids=torch.tensor([seq], device=dev)).logits[0, -1].float()
        top = torch.topk(logits, 2)
        gap = min(gap, float(top.values[0] - top.values[1]))
        seq.append(int(top.indices[0]))
    return seq[len(prompt_ids):], gap


@torch.no_grad()
def sample_continuation(model, prompt_ids, n, temperature, top_k, seed):
    """n tokens drawn from softmax(logits / temperature) cut to the top_k, full recompute each step."""
    dev = next(model.parameters()).device
    gen = torch.Generator(device=dev).manual_seed(seed)
    seq = list(prompt_ids)
    for _ in range(n):
        logits = model(input_ids=torch.tensor([seq], device=dev)).logits[0, -1].float() / temperature
        top = torch.topk(logits, top_k)
        pick = torch.multinomial(torch.softmax(top.values, dim=-1), 1, generator=gen)
        seq.append(int(top.indices[pick]))
    return seq[len(prompt_ids):]


def step(what, fn, failures):
    """Runs fn(); on an exception logs it, records it in failures and returns None (the remaining steps still run:
    the one GPU run should bring back whatever it can)."""
    try:
        return fn()
    except Exception as e:
        traceback.print_exc()
        log(f"FAILED: {what}: {type(e).__name__}: {e}")
        failures.append(f"{what}: {type(e).__name__}: {e}")
        return None


def finish_yoco(args, model, impl, tok, out, metrics, clock):
    """After training a YOCO model: the Hugging Face folder (config.json with kv_source, fp32 safetensors without k/v
    for the sharing layers), goldens from the saved weights in fp32 on the GPU, the GGUF, samples, metrics.json."""
    hf = out / "hf"
    name = args.name
    vocab = tok.get_vocab_size()
    cfg = yoco_config(args, vocab)
    failures = []
    model.to("cpu").float()
    metrics["hf_tensors"] = yoco_ref.save_hf_folder(model, cfg, hf)
    GenerationConfig(bos_token_id=EOS_ID, eos_token_id=EOS_ID, do_sample=False).save_pretrained(hf)
    metrics["failures"] = failures
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    log(f"saved the HF folder ({len(metrics['hf_tensors'])} tensors, {clock():.0f}s)")
    del model

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(DEVICE)
    state = yoco_ref.read_safetensors_f32(hf / "model.safetensors")
    ref = yoco_ref.load_weights(fresh_yoco(impl, args, vocab), state).to(dev).eval()
    ref16 = yoco_ref.load_weights(fresh_yoco(impl, args, vocab), yoco_ref.round_to_f16(state)).to(dev).eval()
    ids = tok.encode(GOLDEN_TEXT, add_special_tokens=False).ids[:GOLDEN_TOKENS]
    golden = {"model": f"{name}.gguf", "implementation": impl, "prompt_text": tok.decode(ids), "prompt_ids": ids,
              "logits_shape": [len(ids), vocab],
              "logits_dtype": "float32 little-endian, row t = the logits after prompt token t",
              "greedy_prompt_ids": ids}

    def logits_of(m, label):
        with torch.no_grad():
            x = m(input_ids=torch.tensor([ids], device=dev)).logits[0].float().cpu().numpy()
        fname = f"{name}-logits-{label}.f32"
        x.astype("<f4").tofile(out / fname)
        return fname, x

    def goldens():
        f32_file, l32 = logits_of(ref, "fp32")
        f16_file, l16 = logits_of(ref16, "f16w")
        cont32, gap32 = argmax_continuation(ref, ids, GOLDEN_CONTINUATION)
        cont16, gap16 = argmax_continuation(ref16, ids, GOLDEN_CONTINUATION)
        golden.update({
            "logits_file": f16_file, "greedy_continuation": cont16, "greedy_min_top2_gap": round(gap16, 6),
            "logits_fp32_file": f32_file, "greedy_continuation_fp32": cont32,
            "greedy_min_top2_gap_fp32": round(gap32, 6),
            "fp32_vs_f16w_max_abs_diff": float(np.abs(l32 - l16).max()),
            "greedy_text_f16w": tok.decode(cont16), "greedy_text_fp32": tok.decode(cont32)})
        log(f"goldens: greedy min gap fp32 {gap32:.4f}, f16w {gap16:.4f}; fp32 vs f16 weights max |logit diff| "
            f"{golden['fp32_vs_f16w_max_abs_diff']:.4f}; same continuation: {cont16 == cont32}")

    def cross():
        other = "naive" if impl == "transformers" else "transformers"
        alt = yoco_ref.load_weights(fresh_yoco(other, args, vocab), state).to(dev).eval()
        x = torch.tensor([ids], device=dev)
        golden["cross_check"] = {"other_implementation": other, "max_abs_diff": yoco_ref.cross_check(ref, alt, x)}
        log(f"trained weights, {impl} vs {other}: max |logit diff| {golden['cross_check']['max_abs_diff']:.3g}")

    def greedy4():
        res = []
        for prompt in GREEDY_PROMPTS:
            p_ids = tok.encode(prompt, add_special_tokens=False).ids
            cont, gap = argmax_continuation(ref, p_ids, 64)
            res.append({"prompt": prompt, "prompt_ids": p_ids, "continuation_ids": cont,
                        "text": tok.decode(cont, skip_special_tokens=False), "min_top2_gap": round(gap, 6)})
        (out / f"{name}-greedy.json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
        return res

    step("goldens", goldens, failures)
    step("cross-check", cross, failures)
    (out / f"{name}-golden.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    greedy = step("greedy prompts", greedy4, failures) or []
    step("GGUF export", lambda: export_gguf.export(hf, out / f"{name}.gguf", args.gguf_type, name=name), failures)
    log(f"exported {name}.gguf ({clock():.0f}s)")

    def sampled():
        res = []
        for i, prompt in enumerate(SAMPLE_PROMPTS):
            p_ids = tok.encode(prompt, add_special_tokens=False).ids
            cont = sample_continuation(ref, p_ids, 96, 0.8, 40, 42 + i)
            res.append({"prompt": prompt,
                        "settings": "temperature 0.8, top-k 40, seed %d, 96 tokens (torch multinomial on the GPU)"
                        % (42 + i), "text": prompt + tok.decode(cont, skip_special_tokens=True)})
        (out / "samples.json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
        return res

    smp = step("samples", sampled, failures) or []
    for g in greedy + smp:
        log(repr(g.get("prompt")), "->", repr(g["text"][:300]))
    metrics["total_seconds"] = round(clock(), 1)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    log(f"done in {clock():.0f}s; failures: {failures or 'none'}")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description="Train tinygpt's bundled Llama model.")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--valid", required=True)
    ap.add_argument("--long", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="tinygpt-flagship")
    ap.add_argument("--tokenizer", default=None, help="reuse this tokenizer.json instead of training one")
    ap.add_argument("--arch", default="llama", choices=["llama", "yoco"])
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--inter", type=int, default=768)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--theta", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--time-budget", type=float, default=300.0, help="seconds of training")
    ap.add_argument("--max-epochs", type=float, default=6.0,
                    help="stop after this many passes over the training stream (the corpus is the limit: see "
                         "models/README.md)")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-windows", type=int, default=0, help="validation windows per evaluation (0: all)")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--corpus-chars", type=int, default=None, help="cut each source (smoke tests)")
    ap.add_argument("--gguf-type", default="f16", choices=["f32", "f16", "q8_0"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bos-first", action="store_true",
                    help="the attention-sink experiment (docs/RESULTS.md): every training window starts with BOS "
                         "(id %d) and the tokenizer adds it to prompts; skips the goldens and samples" % EOS_ID)
    args = ap.parse_args()
    out = Path(args.out)
    hf = out / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    clock = lm_common.Timer()

    corpus = lm_common.read_corpus(args.corpus, args.corpus_chars)
    texts = [t for _, t in corpus]
    if args.tokenizer:
        tok = Tokenizer.from_file(args.tokenizer)
    else:
        tok = lm_common.train_byte_level(texts, args.vocab)
    lm_common.save_tokenizer(tok, hf, "bytelevel", args.ctx)
    if args.bos_first:  # prompts start the way every training window did
        cfg_path = hf / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        cfg["add_bos_token"] = True
        cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    log(f"tokenizer: {tok.get_vocab_size()} ids ({clock():.0f}s)")
    train_stream = lm_common.encode_documents(tok, texts, sep_ids=[EOS_ID])
    valid_text = Path(args.valid).read_text(encoding="utf-8")
    long_text = Path(args.long).read_text(encoding="utf-8")
    val_stream = lm_common.encode_documents(tok, [valid_text], sep_ids=[])
    long_stream = lm_common.encode_documents(tok, [long_text], sep_ids=[])
    train_bytes = sum(len(t.encode("utf-8")) for t in texts)
    log(f"tokens: train {train_stream.size} ({train_bytes / train_stream.size:.2f} bytes/token), "
        f"valid {val_stream.size}, long {long_stream.size} ({clock():.0f}s)")

    impl, self_check = "transformers", None
    if args.arch == "yoco":
        model, impl, self_check = build_yoco_checked(args, tok.get_vocab_size())
    else:
        model = build_model(args, tok.get_vocab_size())
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {args.arch} ({impl}), {n_params / 1e6:.2f} M parameters ({n_params})")
    result = train(args, model, train_stream, val_stream, out)

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    val_t = torch.from_numpy(val_stream.astype(np.int64)).to(dev)
    long_t = torch.from_numpy(long_stream.astype(np.int64)).to(dev)
    rng = np.random.default_rng(123)
    starts = rng.integers(0, train_stream.size - args.ctx - 1, size=256)
    train_sample = torch.from_numpy(np.concatenate([train_stream[s:s + args.ctx + 1] for s in starts])
                                    .astype(np.int64)).to(dev)
    val_loss, val_tokens = evaluate(model, val_t, args.ctx, bf16=False)
    long_loss, long_tokens = evaluate(model, long_t, args.ctx, bf16=False)
    # windows of ctx+1 tokens laid end to end: evaluate() with ctx+1 would cross windows, so score each exactly
    tr = train_sample.view(len(starts), args.ctx + 1)
    train_loss = 0.0
    with torch.no_grad():
        model.eval()
        for i in range(0, tr.shape[0], 32):
            logits = model(input_ids=tr[i:i + 32, :-1]).logits
            train_loss += float(F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                tr[i:i + 32, 1:].reshape(-1), reduction="sum"))
    train_loss /= tr.shape[0] * args.ctx
    valid_bytes = len(valid_text.encode("utf-8"))
    metrics = {
        "name": args.name, "arch": args.arch, "parameters": n_params,
        "shape": {k: getattr(args, k) for k in ("vocab", "layers", "hidden", "heads", "kv_heads", "inter", "ctx",
                                                "theta", "eps")},
        "optimiser": {k: getattr(args, k) for k in ("batch", "lr", "min_lr_frac", "warmup", "wd", "clip",
                                                    "time_budget", "max_epochs", "seed")},
        "train_tokens": int(train_stream.size), "train_bytes": train_bytes,
        "valid_tokens": int(val_stream.size), "valid_bytes": valid_bytes, "long_tokens": int(long_stream.size),
        **result,
        "final_fp32": {
            "train_loss_sample": round(train_loss, 4), "train_ppl_sample": round(math.exp(train_loss), 3),
            "val_loss": round(val_loss, 4), "val_ppl": round(math.exp(val_loss), 3),
            "val_bits_per_byte": round(val_loss * val_tokens / (math.log(2) * valid_bytes), 4),
            "long_heldout_loss": round(long_loss, 4), "long_heldout_ppl": round(math.exp(long_loss), 3),
            "protocol": f"non-overlapping {args.ctx}-token windows, every target scored, fp32 on the GPU",
        },
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__,
                     "tokenizers": __import__("tokenizers").__version__},
        "command": " ".join(sys.argv),
    }
    log("final:", json.dumps(metrics["final_fp32"]))
    if args.arch == "yoco":
        metrics["yoco"] = {"kv_source": yoco_ref.kv_source_for(args.layers), "implementation": impl,
                           "self_check": self_check}
        return finish_yoco(args, model, impl, tok, out, metrics, clock)

    model.to("cpu").float()
    lm_common.save_model(model, hf)
    GenerationConfig(bos_token_id=EOS_ID, eos_token_id=EOS_ID, do_sample=False).save_pretrained(hf)
    export_gguf.export(hf, out / f"{args.name}.gguf", args.gguf_type, name=args.name)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    log(f"saved HF folder, {args.name}.gguf and metrics.json ({clock():.0f}s)")
    if args.bos_first:
        return 0

    cpu_model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32, attn_implementation="eager").eval()
    golden = greedy_goldens(cpu_model, tok)
    (out / "flagship-greedy.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    (out / "flagship-tokenization.json").write_text(
        json.dumps(tokenization_golden(tok, valid_text, long_text), indent=1, ensure_ascii=False) + "\n")
    smp = samples(cpu_model, tok)
    (out / "samples.json").write_text(json.dumps(smp, indent=1, ensure_ascii=False) + "\n")
    for g in golden + smp:
        log(repr(g.get("prompt")), "->", repr(g["text"][:300]))
    metrics["total_seconds"] = round(clock(), 1)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    log(f"done in {clock():.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
