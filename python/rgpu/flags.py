"""Settings of the client's PyTorch that change what the server's kernels
compute; they travel with the first batch after they change."""
import torch


def current_flags():
    return [
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        bool(torch.backends.cudnn.deterministic),
        bool(torch.backends.cudnn.benchmark),
        bool(torch.backends.cuda.matmul.allow_tf32),
        bool(torch.backends.cudnn.allow_tf32),
        # Whether convolutions (and the like) may take cuDNN's kernels.
        bool(torch.backends.cudnn.enabled),
    ]
