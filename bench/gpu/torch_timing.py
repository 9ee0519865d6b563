"""How the PyTorch peers of bench/gpu time a training step (torch_gpt2_cuda.py,
torch_lora_cuda.py): `warmup` untimed steps after the peak counters are reset, then `steps`
steps each timed with CUDA events; the median step in seconds and the last step's result."""
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
