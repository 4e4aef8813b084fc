"""``msd_volumes``: the Medical Segmentation Decathlon layout (``dataset.json`` + ``imagesTr/``
+ ``labelsTr/`` NIfTI), which AMOS, FLARE, nnU-Net datasets and many others follow.

Both ``dataset.json`` dialects are read: MSD's (``labels`` value -> name, ``modality``,
``training`` list of ``{"image", "label"}``) and nnU-Net v2's (``labels`` name -> value,
``channel_names``, ``file_ending``, no list: ``imagesTr/<case>_0000<ext>`` pairs with
``labelsTr/<case><ext>``). The MSD tarballs also hold macOS ``._*`` resource-fork files in
``imagesTr``/``labelsTr`` (nnU-Net issues #120, #240: "files in the decathlon data that are
not supposed to be there"); they are not in the training list, and in the nnU-Net dialect every
file starting with ``.`` or ``_`` is skipped, as nnU-Net's own ``convert_MSD_dataset`` does.
nnU-Net v2 region labels (``"whole tumor": [1, 2, 3]``, unions evaluated by the challenge, not
voxel values) are not structures and are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from ..errors import ImageProblem, SourceError
from ..records import QuarantineEntry, Sample
from ..store.table_text import read_json_file
from .base import LAYOUTS, FileCandidate, FileLayout, ScanContext
from .discovery import Alternatives, expect_paths
from .volume_slices import (
    VOLUME_PROVIDES,
    CaseVolumes,
    VolumeSliceOptions,
    read_slice,
    slice_candidates,
)

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
    """Label value -> name, from either dialect; background (0) and nnU-Net v2 region labels
    (a list of values) left out."""
    out: dict[int, str] = {}
    for key, value in raw.items():
        if isinstance(value, list | tuple):
            continue  # nnU-Net v2 region: a union of the values listed, not a voxel value
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise SourceError(
                f"dataset.json field 'labels.{key}': expected a label name or value, "
                f"got {_shown(value)}",
                where=where,
            )
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


def _shown(value: object) -> str:
    text = f"{type(value).__name__} {value!r}"
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(what: str, field: str, expected: str, value: object, path: Path) -> SourceError:
    """The one-line error of a dataset.json field the whole source depends on."""
    return SourceError(
        f"{what} field {field!r}: expected {expected}, got {_shown(value)}",
        where=str(path),
        fix="repair dataset.json (see the MSD / nnU-Net v2 dataset.json format)",
    )


def channel_names(meta: dict, what: str, path: str) -> list[str]:
    """Channel names in channel order from ``modality`` (MSD) or ``channel_names`` (nnU-Net
    v2), ``{"0": "CT", "1": ...}``; CT when neither is given."""
    field = "modality" if meta.get("modality") else "channel_names"
    channels = meta.get(field) or {"0": "CT"}
    expected = 'an object of channel number -> name, e.g. {"0": "CT"}'
    if not isinstance(channels, dict):
        raise _bad(what, field, expected, channels, Path(path))
    for key, name in channels.items():
        if not str(key).isdigit() or not isinstance(name, str):
            raise _bad(what, f"{field}.{key}", expected, name, Path(path))
    return [channels[k] for k in sorted(channels, key=int)]


def training_pair(
    ctx: ScanContext, rel: str, i: int, entry: object
) -> tuple[str, str] | QuarantineEntry:
    """``(image, label)`` of ``training[i]``, or the quarantine entry naming what is wrong."""
    where = f"{rel} training[{i}]"
    expected = '{"image": "./imagesTr/<case>.nii.gz", "label": "./labelsTr/<case>.nii.gz"}'
    if not isinstance(entry, dict):
        return ctx.quarantine(where, f"{where} is {_shown(entry)}; expected {expected}")
    image = entry.get("image")
    file = image.removeprefix("./") if isinstance(image, str) and image else where
    for key in ("image", "label"):
        value = entry.get(key)
        if not isinstance(value, str) or not value:
            got = "missing" if key not in entry else _shown(value)
            return ctx.quarantine(
                file, f"{where} field {key!r} is {got}; expected a path below the root"
            )
    return entry["image"].removeprefix("./"), entry["label"].removeprefix("./")


class MsdVolumesOptions(VolumeSliceOptions):
    dataset_json: str = "dataset.json"
    channels: Literal["first", "all"] = "all"  # 4-D images: one sample per channel or the first
    ct_window: str = "abdomen"  # display window of CT volumes (media.volume.CT_WINDOWS)


@LAYOUTS.register("msd_volumes")
class MsdVolumes(FileLayout):
    name = "msd_volumes"
    counts_cheaply = False  # candidates come from reading each label volume
    Options = MsdVolumesOptions

    def expects(self) -> Alternatives:
        return [
            expect_paths(self.options.dataset_json, kind="file"),
            expect_paths("imagesTr", "labelsTr", kind="dir"),
        ]

    def provides(self) -> set[str]:
        return VOLUME_PROVIDES

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """The slices of every case ``dataset.json`` lists (or nnU-Net v2's ``labelsTr``
        pairs), in that order; a case whose path leaves the root or whose file is missing is
        one quarantine entry in its place."""
        meta, path = self._dataset_json(ctx)
        labels = read_labels(meta["labels"], str(path))
        names = channel_names(meta, f"{ctx.source}: {self.options.dataset_json}", str(path))
        modality = modality_of(names)
        opts = self.options
        if modality == "ct" and opts.window is None:
            opts = opts.model_copy(update={"window": opts.ct_window})
        attributes = {"task": str(meta.get("name", ""))}
        for pair in self._pairs(ctx, meta):
            if isinstance(pair, QuarantineEntry):
                yield pair
                continue
            image, label = pair
            case = Path(label).name.split(".")[0]
            try:
                image_path, label_path = ctx.safe_path(image), ctx.safe_path(label)
            except ImageProblem as exc:
                yield ctx.quarantine(image, str(exc))
                continue
            missing = [p for p in (image_path, label_path) if not p.is_file()]
            if missing:
                yield ctx.quarantine(
                    image,
                    f"listed in {opts.dataset_json} but {ctx.rel(missing[0])} is missing",
                )
                continue
            images = self._channels(image_path, names, split_files="training" not in meta)
            yield from slice_candidates(
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

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """One sequence of one slice (the label volume was read by ``candidates``)."""
        return read_slice(ctx, candidate)

    def _dataset_json(self, ctx: ScanContext) -> tuple[dict, Path]:
        """``dataset.json`` read (and noted for ``inspect``), and its path."""
        rel = self.options.dataset_json
        path = ctx.require_file(rel, "dataset description")
        try:
            meta = read_json_file(path)
        except (ValueError, RecursionError) as exc:
            raise SourceError(f"{ctx.source}: {rel} is not JSON ({exc})", where=str(path)) from None
        what = f"{ctx.source}: {rel}"
        if not isinstance(meta, dict):
            raise _bad(what, "(top level)", "a JSON object", meta, path)
        if "labels" not in meta:
            raise SourceError(
                f"{ctx.source}: {rel} has no 'labels' entry",
                where=str(path),
                fix="expected the MSD or nnU-Net dataset.json",
            )
        if not isinstance(meta["labels"], dict):
            raise _bad(
                what,
                "labels",
                'an object of value -> name (MSD, {"1": "liver"}) or name -> value '
                '(nnU-Net v2, {"liver": 1})',
                meta["labels"],
                path,
            )
        training = meta.get("training")
        if training is not None and not isinstance(training, list):
            raise _bad(what, "training", 'a list of {"image": ..., "label": ...}', training, path)
        ending = meta.get("file_ending", ".nii.gz")
        if not isinstance(ending, str) or not ending.startswith("."):
            raise _bad(what, "file_ending", "a suffix such as '.nii.gz'", ending, path)
        ctx.note_table(path, list(meta))  # dataset.json's keys, shown by `inspect`
        return meta, path

    def _channels(
        self, image: Path, names: list[str], split_files: bool
    ) -> dict[str, tuple[Path, int | None]]:
        if len(names) == 1:
            return {"": (image, None)}
        chosen = names[:1] if self.options.channels == "first" else names
        if split_files:  # nnU-Net v2: one file per channel, <case>_0000, <case>_0001, ...
            return {
                name: (image.with_name(image.name.replace("_0000", f"_{k:04d}", 1)), None)
                for k, name in enumerate(chosen)
            }
        return {name: (image, k) for k, name in enumerate(chosen)}

    def _pairs(self, ctx: ScanContext, meta: dict) -> list[tuple[str, str] | QuarantineEntry]:
        """``(image, label)`` paths of each case; a malformed ``training`` entry is a
        quarantine entry in its place (the other cases convert), all of them malformed a
        :class:`SourceError`."""
        if meta.get("training"):
            rel = self.options.dataset_json
            out = [training_pair(ctx, rel, i, e) for i, e in enumerate(meta["training"])]
            if all(isinstance(p, QuarantineEntry) for p in out):
                raise SourceError(
                    f"{ctx.source}: no usable entry in {rel} 'training' ({out[0].reason})",
                    where=str(ctx.root / rel),
                    fix='each entry must be {"image": "./imagesTr/<case>.nii.gz", '
                    '"label": "./labelsTr/<case>.nii.gz"}',
                )
            return out
        # nnU-Net v2: labelsTr/<case><ext> beside imagesTr/<case>_0000<ext> (first channel file)
        ext = meta.get("file_ending", ".nii.gz")
        labels_dir = ctx.require_dir("labelsTr", "label volume")
        ctx.require_dir("imagesTr", "image volume")
        out = []
        for label in sorted(labels_dir.glob(f"*{ext}")):
            if not label.name.startswith((".", "_")):
                case = label.name[: -len(ext)]
                out.append((f"imagesTr/{case}_0000{ext}", f"labelsTr/{label.name}"))
        return out
