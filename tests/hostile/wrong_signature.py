# malformed: the function takes the wrong arguments
# expect: exception
def sdpa(qkv):
    return qkv
