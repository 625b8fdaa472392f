"""The training skeleton under all four trainers (sim_sft, sim_rl, agent_sft, agent_rl).

    config.py       typed stage settings with TRL's `SFTConfig` / `GRPOConfig` fields passed through
                    from params.yaml; the fields a stage owns refused; the one device/precision switch
    checkpoints.py  one checkpoint folder per (settings, seed, data), resuming, dropping checkpoints
    launch.py       one launcher: in process, or `accelerate launch` (multi-GPU / multi-node, DeepSpeed)
    trainers.py     what every trainer gets: no empty optimizer groups, MLflow metrics while training,
                    loss and reward series read back from the log history
    policy.py       loading a base model and a trainable LoRA adapter over it
    curves.py       learning curves: a stage's evaluation at 0, ¼, ½, all of its steps (MLflow, resumable)

A stage's module keeps only what is its own: its data, its model and what it saves. This package
imports `models` and nothing above it (the simulator and the agent import it).
"""
