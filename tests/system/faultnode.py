"""A fault-injecting node for the result-validation tests and benchmarks.

Built on pynode.PyNode (written from docs/wire.md alone): it runs each task for real
and then, with probability `rate`, replaces the result's stdout with a wrong answer:

* mode "independent": a random wrong answer (no two faulty nodes agree);
* mode "colluding": the same wrong answer for the same task on every colluding node
  (a function of job and index only), so colluders can form a false quorum.

    node = FaultNode(endpoint, name="bad1", rate=1.0, mode="colluding")
    node.hello(); node.run(...)

Used only by tests/system/test_validation.py; never by the cluster or the client.
"""

import os
import random

from pynode import PyNode


class FaultNode(PyNode):
    def __init__(self, endpoint, name="faulty", rate=1.0, mode="independent", seed=None,
                 **kw):
        super().__init__(endpoint, name=name, client="faultnode 1", **kw)
        assert mode in ("independent", "colluding"), mode
        self.rate = rate
        self.mode = mode
        self.rng = random.Random(seed)
        self.wrong = 0  # wrong results returned

    def run_task(self, task):
        result = super().run_task(task)
        if result is None or "error" in result or self.rng.random() >= self.rate:
            return result
        self.wrong += 1
        if self.mode == "colluding":
            result["stdout"] = b"colluded %d.%d\n" % (task["job"], task["idx"])
        else:
            result["stdout"] = b"wrong %s\n" % os.urandom(8).hex().encode()
        result["exit"] = 0
        return result
