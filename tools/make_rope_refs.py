#!/usr/bin/env python3
"""References for RoPE scaling and an explicit head_dim, from transformers (runs on the GPU machine, which has
transformers; CPU only, float32, eager attention).

Responsibility: build tiny random Llama models whose config.json uses the RoPE scalings tinygpt implements, save each
as a Hugging Face folder (config.json, model.safetensors in F32, generation_config.json) and write transformers'
logits for a fixed sequence of ids, so that tests/unit/test_rope_scaling.c can compare tinygpt's forward pass with
transformers' _compute_*_parameters without transformers at test time.

Each model: hidden 64, 4 heads of head_dim 32 (not hidden / heads = 16), 2 KV heads, 2 layers, FFN 96, vocab 1024
(the tokenizer of tests/data/fixtures/smollm2 is copied beside it by the test), context 512, theta 10000, tied.
  llama3   rope_scaling {"rope_type": "llama3", factor 8, low 1, high 4, original_max_position_embeddings 64}
           (transformers 5 saves it as rope_parameters; the test also reads it rewritten as rope_scaling):
           with head_dim 32 and theta 1e4 the wavelengths fall in all three regions (kept, smoothed, divided)
  linear   transformers 5's rope_parameters {"rope_type": "linear", "factor": 4, "rope_theta": 10000}
The ids: 200 tokens (positions past original_max_position_embeddings, where the scalings matter), seeded.

Writes OUT/rope-<name>/{config.json, model.safetensors, generation_config.json, ids.json, logits.f32} where
logits.f32 is [len(ids), vocab] float32 little-endian.

Usage: tools/make_rope_refs.py OUTDIR
(This is the exact code that made tests/data/real/rope-*: it was sent to the GPU machine compressed inside the
command line, hence the terse style.)
"""
import json,sys,numpy as np,torch,transformers as T
from pathlib import Path
def b(n,r,o):
 torch.manual_seed(1234)
 c=T.LlamaConfig(vocab_size=1024,hidden_size=64,intermediate_size=96,num_hidden_layers=2,num_attention_heads=4,num_key_value_heads=2,head_dim=32,max_position_embeddings=512,rms_norm_eps=1e-5,tie_word_embeddings=True,bos_token_id=0,eos_token_id=[0,2],attn_implementation="eager",**r)
 m=T.LlamaForCausalLM(c).float().eval()
 with torch.no_grad():
  for p in m.parameters():p.normal_(0.0,0.15)
  for k,p in m.named_parameters():
   if "norm" in k:p.uniform_(0.5,1.5)
 d=o/("rope-"+n);m.save_pretrained(d,safe_serialization=True)
 T.GenerationConfig(bos_token_id=0,eos_token_id=[0,2],do_sample=True,temperature=0.7,top_p=0.85,top_k=20).save_pretrained(d)
 i=torch.randint(3,1024,(1,200),generator=torch.Generator().manual_seed(7))
 with torch.no_grad():l=m(i).logits[0].float().numpy()
 (d/"ids.json").write_text(json.dumps({"ids":i[0].tolist(),"transformers":T.__version__,"torch":torch.__version__}))
 l.astype("<f4").tofile(d/"logits.f32");print(n,(d/"config.json").read_text(),l.shape,float(np.abs(l).max()))
o=Path(sys.argv[1]);o.mkdir(parents=True,exist_ok=True)
b("llama3",{"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":64},"rope_theta":10000.0},o)
b("linear",{"rope_parameters":{"rope_type":"linear","factor":4.0,"rope_theta":10000.0}},o)
