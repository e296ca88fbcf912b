"""Compare our logits (expected.json from write-expected.ts) with transformers / peft. See write-expected.ts."""
import json
import sys

import torch
from transformers import AutoModelForCausalLM

out = sys.argv[1]
data = json.load(open(f"{out}/expected.json"))
ids = torch.tensor([data["ids"]])
worst = 0.0
failed = []
for name, case in data["cases"].items():
    if case["kind"] == "peft":
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(case["base"], dtype=torch.float32)
        model = PeftModel.from_pretrained(base, case["dir"])
    else:
        model = AutoModelForCausalLM.from_pretrained(case["dir"], dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        got = model(ids).logits[0].float()
    ours = torch.tensor(case["logits"])
    diff = (got - ours).abs().max().item()
    scale = ours.abs().max().item()
    worst = max(worst, diff)
    ok = diff < 1e-3
    if not ok:
        failed.append(name)
    print(f"{name:28s} max|diff| {diff:.2e}  (max|logit| {scale:.2f})  {'ok' if ok else 'MISMATCH'}")
import transformers, peft

print(f"transformers {transformers.__version__}, peft {peft.__version__}, torch {torch.__version__}: worst {worst:.2e}")
print(f"{len(data['cases']) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
