"""The GPU table from bench/gpu/run.sh's results.jsonl (one JSON line per run)."""

import json
import sys


def ms(x):
    return "—" if x is None else f"{x:.2f}"


rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip().startswith("{")]
print("| model | runtime | ms/forward P=0 | P=1k | P=4k | tokens/s B=1 | tokens/s B=8 | forwards/token |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    f = r.get("forwardMs", {})
    if "provider" in r:
        g = r["generation"]
        print(f"| {r['dir'].rstrip('/').split('/')[-2 if r['dir'].endswith('model') else -1]} | ONNX Runtime {r['provider']} | {ms(f.get('0'))} | {ms(f.get('1024'))} | {ms(f.get('4096'))} "
              f"| {g['batch1']['tokensPerSecond']:.1f} | {g['batch8']['tokensPerSecond']:.1f} | {g['batch1']['forwardsPerToken']:.2f} |")
    else:
        print(f"| mid ({r['parameters'] / 1e6:.0f} M) | PyTorch CUDA ({r['device']}) | {ms(f.get('0'))} | {ms(f.get('1024'))} | {ms(f.get('4096'))} "
              f"| B=1 P=256: {r['batch1_p256_ms']:.2f} ms/forward | B=8 P=256: {r['batch8_p256_ms']:.2f} ms/forward | — |")
