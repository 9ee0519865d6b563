"""How the PyTorch peers of bench/gpu time a training step and report it (torch_gpt2_cuda.py,
torch_lora_cuda.py): `warmup` untimed steps after the peak counters are reset, then `steps`
steps each timed with CUDA events; one JSON object with the median step, tokens/s and torch's
peaks, printed and optionally written."""
import json
import statistics

import torch


def time_steps(step, warmup, steps):
    torch.cuda.reset_peak_memory_stats()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times, last = [], None
    for _ in range(steps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        last = step()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1000.0)
    return statistics.median(times), last


def report(a, med, loss, **fields):
    """Prints (and writes to a.json, if given) `fields` with the figures every peer gives."""
    out = dict(fields, gpu=torch.cuda.get_device_name(0), batch=a.batch, seq=a.seq,
               median_step_s=med, tokens_per_second=a.batch * a.seq / med,
               last_loss=float(loss.item()),
               max_memory_allocated=torch.cuda.max_memory_allocated(),
               max_memory_reserved=torch.cuda.max_memory_reserved())
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
