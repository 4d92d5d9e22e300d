"""Held-out sentences: tuned SmolLM2 facts vs the default decomposer's (1.5B) and human facts; time per sentence."""
import json, os, sys, time
sys.path.insert(0, ".")
WORK = os.environ.get("WORK", "/tmp/smol")
from fscore_lite.backends.llm import LlamaRunner
from fscore_lite.cache import CallCache
from fscore_lite.manifest import sha256_file
from fscore_lite.metaeval.decomposer_proxy import compare
T = int(os.environ.get("T", "1")); N = int(sys.argv[2])
held = json.load(open(WORK + "/ckpt.held.json"))[:N]
human = [h for _, _, _, h in held]
gguf = sys.argv[1]
llm = LlamaRunner(gguf, sha256_file(gguf), "tuned", threads=T, n_ctx=1024, cache=CallCache(None))
out = []; t = time.perf_counter()
for _, _, s, _ in held:
    txt = llm.generate(f"Sentence: {s}\nFacts:\n", max_tokens=160, stop=("\n\n",))
    out.append([l[2:].strip() for l in txt.splitlines() if l.startswith("- ") and l[2:].strip()])
tuned_s = time.perf_counter() - t
res = {"n": len(held), "tuned_s_per_sentence": tuned_s / len(held), "tuned": compare(out, human)}
if len(sys.argv) > 3:  # the default decomposer on the same sentences (call cache of the user's home, timed uncached separately)
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.factscore.decomposers import make_decomposer
    from fscore_lite.settings import Settings
    st = Settings(threads=T, use_cache=sys.argv[3] == "cache")
    big = load_llm(st, cache=CallCache(st.cache_path if st.use_cache else None))
    dec = make_decomposer("default", lambda: big)
    t = time.perf_counter(); d = []
    for _, _, s, _ in held:
        d.append([f for x in dec.run(s) for f in x.facts])
    res["default_s_per_sentence"] = (time.perf_counter() - t) / len(held)
    res["default"] = compare(d, human)
    res["default_cached"] = sys.argv[3] == "cache"
print(json.dumps(res, indent=1))
json.dump({"tuned": out}, open(WORK + "/ev_out.json", "w"))
