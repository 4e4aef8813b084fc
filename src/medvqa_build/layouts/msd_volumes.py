"""``msd_volumes``: the Medical Segmentation Decathlon layout (``dataset.json`` + ``imagesTr/``
+ ``labelsTr/`` NIfTI), which AMOS, FLARE, nnU-Net datasets and many others follow.

Both ``dataset.json`` dialects are read: MSD's (``labels`` value -> name, ``modality``,
``training`` list of ``{"image", "label"}``) and nnU-Net v2's (``labels`` name -> value,
``channel_names``, ``file_ending``, no list: ``imagesTr/<case>_0000<ext>`` pairs with
``labelsTr/<case><ext>``). The MSD tarballs also hold macOS ``._*`` files in ``imagesTr``; they
are not in the training list and are never read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from ..errors import SourceError
from ..media.image import ImageProblem
from ..quarantine import QuarantineEntry
from ..records import Sample
from .base import LAYOUTS, ScanContext
from .volume_slices import CaseVolumes, VolumeSliceOptions, scan_case

_CT_NAMES = {"ct", "cbct"}
_US_NAMES = {"us", "ultrasound"}


def modality_of(channel_names: list[str]) -> str:
    """Sample modality from ``dataset.json`` channel names (MSD writes "CT", "MRI", "FLAIR"...)."""
    lowered = {n.strip().lower() for n in channel_names}
    if lowered and lowered <= _CT_NAMES:
        return "ct"
    if lowered and lowered <= _US_NAMES:
        return "ultrasound"
    return "mri"


def read_labels(raw: dict, where: str) -> dict[int, str]:
    """Label value -> name, from either dialect; background (0) left out."""
    out: dict[int, str] = {}
    for key, value in raw.items():
        if isinstance(value, int) or (
            isinstance(value, str) and value.isdigit() and not str(key).isdigit()
        ):
            out[int(value)] = str(key)  # nnU-Net v2: {"spleen": 1}
        elif str(key).isdigit():
            out[int(key)] = str(value)  # MSD: {"1": "spleen"}
        else:
            raise SourceError(
                f"dataset.json label entry {key!r}: {value!r} is neither "
                "'value: name' nor 'name: value'",
                where=where,
            )
    out.pop(0, None)
    return out


class MsdVolumesOptions(VolumeSliceOptions):
    dataset_json: str = "dataset.json"
    channels: Literal["first", "all"] = "all"  # 4-D images: one sample per channel or the first
    ct_window: str = "abdomen"  # display window of CT volumes (media.volume.CT_WINDOWS)


@LAYOUTS.register("msd_volumes")
class MsdVolumes:
    name = "msd_volumes"
    Options = MsdVolumesOptions

    def __init__(self, options: MsdVolumesOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        path = ctx.require_file(self.o.dataset_json, "dataset description")
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SourceError(
                f"{ctx.source}: {self.o.dataset_json} is not JSON ({exc})", where=str(path)
            ) from None
        if "labels" not in meta:
            raise SourceError(
                f"{ctx.source}: {self.o.dataset_json} has no 'labels' entry",
                where=str(path),
                fix="expected the MSD or nnU-Net dataset.json",
            )
        labels = read_labels(meta["labels"], str(path))
        channels = meta.get("modality") or meta.get("channel_names") or {"0": "CT"}
        names = [channels[k] for k in sorted(channels, key=int)]
        modality = modality_of(names)
        opts = self.o
        if modality == "ct" and opts.window is None:
            opts = opts.model_copy(update={"window": opts.ct_window})
        attributes = {"task": str(meta.get("name", ""))}
        for image, label in self._pairs(ctx, meta):
            case = Path(label).name.split(".")[0]
            try:
                image_path, label_path = ctx.safe_path(image), ctx.safe_path(label)
            except ImageProblem as exc:
                yield ctx.quarantine(image, str(exc))
                continue
            missing = [p for p in (image_path, label_path) if not p.is_file()]
            if missing:
                yield ctx.quarantine(
                    image, f"listed in {self.o.dataset_json} but {ctx.rel(missing[0])} is missing"
                )
                continue
            images = self._channels(image_path, names, split_files="training" not in meta)
            yield from scan_case(
                ctx,
                opts,
                CaseVolumes(
                    case=case,
                    images=images,
                    label=label_path,
                    labels=labels,
                    modality=modality,
                    group_id=case,
                    attributes=attributes,
                ),
            )

    def _channels(
        self, image: Path, names: list[str], split_files: bool
    ) -> dict[str, tuple[Path, int | None]]:
        if len(names) == 1:
            return {"": (image, None)}
        chosen = names[:1] if self.o.channels == "first" else names
        if split_files:  # nnU-Net v2: one file per channel, <case>_0000, <case>_0001, ...
            return {
                name: (image.with_name(image.name.replace("_0000", f"_{k:04d}", 1)), None)
                for k, name in enumerate(chosen)
            }
        return {name: (image, k) for k, name in enumerate(chosen)}

    def _pairs(self, ctx: ScanContext, meta: dict) -> list[tuple[str, str]]:
        if meta.get("training"):
            return [
                (e["image"].removeprefix("./"), e["label"].removeprefix("./"))
                for e in meta["training"]
            ]
        # nnU-Net v2: labelsTr/<case><ext> beside imagesTr/<case>_0000<ext> (first channel file)
        ext = meta.get("file_ending", ".nii.gz")
        labels_dir = ctx.require_dir("labelsTr", "label volume")
        ctx.require_dir("imagesTr", "image volume")
        out = []
        for label in sorted(labels_dir.glob(f"*{ext}")):
            if not label.name.startswith("._"):
                case = label.name[: -len(ext)]
                out.append((f"imagesTr/{case}_0000{ext}", f"labelsTr/{label.name}"))
        return out
