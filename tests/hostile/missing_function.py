# malformed: the function has another name
# expect: missing
import torch


def attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v
