"""Data parallelism: one place for the worker's environment, collectives, engines and launchers.

- :mod:`.env`: the worker's place (rank, world size, local rank) from any launcher's variables.
- :mod:`.devices`: binding a worker to its GPU, and the mixed precision the GPU supports.
- :mod:`.engine`, :mod:`.torch_engine`, :mod:`.horovod_engine`, :mod:`.engines`: the
  :class:`~landcover.parallel.engine.Engine` interface (join/leave, all-reduce, all-gather and
  barrier on the joined group, model wrapping with
  SyncBatchNorm, DDP, communication hooks and local SGD, the optimizer, the initial broadcast,
  the launcher) and its torch-DDP and Horovod implementations.
- :mod:`.communication`: gradient compression hooks and local SGD.
- :mod:`.failures`: a failed peer told from a local fault.
- :mod:`.launch`, :mod:`.launch_horovod`: starting workers (torchrun's elastic agent,
  ``horovodrun``) and turning failures into one line.

Nothing outside this package asks which engine a run uses; it asks the engine.
"""
