"""``from: {tensorboard: FOLDER, tag: NAME}``: TensorBoard event files under a folder; the scalar
``tag``'s last value, or its whole curve (``series: true``).

Reading needs the ``tensorboard`` package (``pip install 'benchlab[tensorboard]'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import model_validator

from benchlab.collect.extractors import ExtractFailed, Extractor, Series, SharedOptions

if TYPE_CHECKING:
    import numpy as np


class TensorboardOptions(SharedOptions):
    """A ``tensorboard`` source: the folder of event files, and ``tag``, the scalar's name."""

    tensorboard: str
    described = "TensorBoard event files"

    @model_validator(mode="after")
    def _needs_tag(self) -> TensorboardOptions:
        if not self.tag:
            raise ValueError("a 'tensorboard' source needs 'tag', the scalar's name")
        return self


def read_scalars(folder: Path, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of ``tag`` over every event file under ``folder``, sorted by step."""
    import numpy as np
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ModuleNotFoundError as exc:
        from benchlab.names.extras import missing_extra

        if exc.name is None or not exc.name.startswith("tensorboard"):
            raise
        raise ExtractFailed(str(missing_extra("tensorboard", "reading TensorBoard event files"))) from None
    files = sorted(folder.rglob("events.out.tfevents.*"))
    if not files:
        raise ExtractFailed(f"no TensorBoard event files under {folder.name or folder}/")
    points: list[tuple[float, float]] = []
    seen_tags: set[str] = set()
    for path in files:
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        tags = acc.Tags()
        # torch, tensorboardX and TF1 write classic scalars; TF2 and tensorboard's own
        # writer write scalar tensors.
        scalars, tensors = tags.get("scalars", []), tags.get("tensors", [])
        seen_tags.update(scalars, tensors)
        if tag in scalars:
            points += [(float(e.step), float(e.value)) for e in acc.Scalars(tag)]
        elif tag in tensors:
            from tensorboard.util.tensor_util import make_ndarray

            for e in acc.Tensors(tag):
                arr = make_ndarray(e.tensor_proto)
                if arr.size == 1:
                    points.append((float(e.step), float(arr.reshape(-1)[0])))
    if not points:
        raise ExtractFailed(f"no scalar {tag!r} in the event files (scalars: {', '.join(sorted(seen_tags)) or 'none'})")
    arr = np.asarray(sorted(points, key=lambda p: p[0]), dtype=float)
    return arr[:, 0].copy(), arr[:, 1].copy()


def extract_tensorboard(run_dir: Path, source: TensorboardOptions) -> tuple[float, Series | None]:
    """The tag's last value over the folder's event files, and its curve with ``series: true``."""
    assert source.tag
    steps, vals = read_scalars(run_dir / source.tensorboard, source.tag)
    return float(vals[-1]), (steps, vals) if source.series else None


EXTRACTOR = Extractor("tensorboard", TensorboardOptions, extract_tensorboard)
