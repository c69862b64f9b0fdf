"""Reference scaled dot-product attention (self, masked, cross and multi-head)."""
from .attention import (attention_backward, attention_weights, multi_head_attention,
                        scaled_dot_product_attention, sdpa_float64)
from .device import default_device, resolve_device

__all__ = ["attention_backward", "attention_weights", "default_device", "multi_head_attention", "resolve_device",
           "scaled_dot_product_attention", "sdpa_float64"]
