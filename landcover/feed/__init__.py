"""The training feed: from a worker's tiles in memory to the model's input batch on the device.

In the order a batch travels:

1. :mod:`.memory` loads the worker's share of tile pairs (read and checked by
   :mod:`landcover.data.raster`) into memory once, as uint8 arrays.
2. :mod:`.sampler` draws an epoch's patches from them (:class:`~.sampler.PatchSampler`:
   area-weighted tiles, class balance, rare-class oversampling, redraws of mostly ignored
   patches), one random generator per batch; with ``data.augment_on: host`` it applies D4 too
   (:mod:`.augment`: flips and quarter turns, exact for nadir imagery).
3. :mod:`.loader` draws the epoch's batches beside the training step: in a thread
   (:mod:`.prefetch`) or in forked processes that hand each batch over through buffers in shared
   memory mapped once (:mod:`.sharedslots`); on a GPU the batches land in pinned memory.
4. :mod:`.inputs` (:class:`~.inputs.TrainingInput`) takes the uint8 batch to the device
   (asynchronously, from pinned memory) and makes it the model's input there: D4 as one gather
   when ``data.augment_on`` puts it on the device, the photometric augmentation
   (:mod:`.photometric`, with its ranges in :mod:`.photoranges`, noise and blur in
   :mod:`.noiseblur` and its pass chunk by chunk in :mod:`.photopass`) and the standardisation
   (:mod:`landcover.data.normalize`, which ``predict`` shares). The photometric draw's few host
   values reach the device through :mod:`.staging` (:class:`~.staging.PinnedStaging`), so the
   copy waits for no GPU work.

The feed knows nothing of the training loop. :mod:`.share` is its door: training
(:mod:`landcover.training.shares`) has it load the worker's share
(:func:`~.share.load_share`), measure its part of the band statistics
(:func:`~.share.share_stats`), and, once the run's ``auto`` numbers are resolved, build the
sampler and :class:`~.inputs.TrainingInput` (:func:`~.share.build_feed`); the trainer runs it.
It stands on :mod:`landcover.data` (tile pairs, reading, class indexes, band statistics) and on
nothing of ``training``.
"""
