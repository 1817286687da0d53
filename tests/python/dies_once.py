"""examples/dlrm_ddp.py with one fault: under torchrun's first attempt
(TORCHELASTIC_RESTART_COUNT 0), rank DIES_RANK kills itself (SIGKILL, as a
lost host or the OOM killer would) when it comes to step DIES_AT.
    dies_once.py DIES_RANK DIES_AT [dlrm_ddp.py's flags]"""
import importlib.util
import os
import signal
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
spec = importlib.util.spec_from_file_location("dlrm_ddp", os.path.join(root, "examples", "dlrm_ddp.py"))
dlrm_ddp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dlrm_ddp)

dies_rank, dies_at = int(sys.argv[1]), int(sys.argv[2])
sys.argv[1:3] = []
step = dlrm_ddp.Trainer.step


def step_or_die(self, it):
    if it == dies_at and self.rank == dies_rank and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
        os.kill(os.getpid(), signal.SIGKILL)
    return step(self, it)


dlrm_ddp.Trainer.step = step_or_die
dlrm_ddp.main()
