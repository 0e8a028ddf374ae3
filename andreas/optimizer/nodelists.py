"""A construction row's lists of open nodes by placement group and free GPUs
(``kernels._Row``: ``head``, ``nxt``, ``cnt``): a best-fit node is the head of a list,
O(1).
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def _push(head, nxt, cnt, grp, lvl, node):
    """Put an open node with ``lvl`` free GPUs at the head of its group's list."""
    nxt[node] = head[grp, lvl]
    head[grp, lvl] = node
    cnt[grp, lvl] += 1


@njit(cache=True, nogil=True)
def _pop(head, nxt, cnt, grp, lvl):
    """Take the first node of a list: any node with that many free GPUs fits as well."""
    node = head[grp, lvl]
    head[grp, lvl] = nxt[node]
    nxt[node] = -1
    cnt[grp, lvl] -= 1
    return node


@njit(cache=True, nogil=True)
def _unlink(head, nxt, cnt, grp, lvl, node):
    """Take a given open node out of its list (``keep_node``): a walk of that list."""
    prev, at = -1, head[grp, lvl]
    while at >= 0 and at != node:
        prev, at = at, nxt[at]
    if at < 0:
        return
    if prev < 0:
        head[grp, lvl] = nxt[node]
    else:
        nxt[prev] = nxt[node]
    nxt[node] = -1
    cnt[grp, lvl] -= 1
