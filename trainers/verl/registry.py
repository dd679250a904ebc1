"""What termgym registers with veRL, in one call: the recipe's Ray ``worker_process_setup_hook``.

veRL looks its advantage estimators and v1 trainers up by name in whatever process needs them
(the TaskRunner actor computes advantages and picks the trainer), and those processes never import
termgym: Ray runs this hook in each of them first.
"""

from __future__ import annotations


def register_with_verl() -> None:
    """Register ``termgym_turn_grpo`` and the ``termgym_sync`` trainer (idempotent).

    Ray runs a job's hook in *every* worker of the job, so also in the env actors on the sandbox nodes
    of a cluster (``env_kwargs: {ray: ...}``, docs/cluster.md). Those only play episodes and need
    neither veRL nor torch: where veRL is not installed there is nothing to register.
    """
    try:
        from trainers.verl.advantage import register_estimators
        from trainers.verl.metrics import register
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in ("verl", "torch"):
            return
        raise

    register_estimators()
    register()
