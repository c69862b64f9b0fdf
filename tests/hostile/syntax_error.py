# malformed: syntax error
# expect: import
def sdpa(q, k, v:
    return q
