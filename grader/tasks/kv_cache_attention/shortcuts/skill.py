"""The skill skipped: no cache at all, the step attends to its own token only (attn-grader tasks
validate: must lose at least half the points). Its output is the new value, and the caches come back
as they were given."""


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    return value.clone(), k_cache.clone(), v_cache.clone()
