"""``nifti_pairs``: image and label NIfTI files paired by name, per case folder or flat
(BraTS ``<case>_flair.nii`` .. ``<case>_seg.nii``, ACDC ``patientNNN_frameMM.nii.gz`` +
``_gt``, CAMUS ``patientNNNN_2CH_ED.nii.gz`` + ``_gt``).

``images_glob`` finds one anchor file per case (or per frame/view); ``label_replace`` rewrites
its relative path into the label file's; ``sequences`` rewrites it into each MR sequence of the
same case (one sample per sequence per slice, same slice index, so same-case cross-sequence
pairs line up); named groups of ``image_regex`` become attributes; ``info_file`` adds
``key: value`` lines of a per-case text file (its name may use the regex groups);
``phase_from_info`` names the frame whose number an info key (ACDC ``ED``/``ES``) gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceError
from ..quarantine import QuarantineEntry
from ..records import Sample
from .base import LAYOUTS, ScanContext
from .volume_slices import CaseVolumes, VolumeSliceOptions, scan_case


class NiftiPairsOptions(VolumeSliceOptions):
    images_glob: str  # relative to the root, e.g. "**/BraTS20_Training_*_flair.nii"
    image_regex: str = r"(?P<case>[^/]+?)\.nii(\.gz)?$"  # needs a 'case' group
    label_replace: tuple[str, str]  # (regex, replacement) on the anchor's relative path
    sequences: dict[str, str] = {}  # sequence name -> replacement of sequence_regex
    sequence_regex: str = ""
    labels: dict[int, str]  # label value -> raw structure name (as the owners document it)
    modality: str | None = None  # default: the manifest part's modality
    group: str = "case"  # regex group that names the patient
    # e.g. "{dir}/Info.cfg" (ACDC); named groups of image_regex fill in too:
    # "{dir}/Info_{view}.cfg" (CAMUS, one file per view)
    info_file: str | None = None
    phase_from_info: dict[str, str] = {}  # regex group -> info keys whose value it may equal


@LAYOUTS.register("nifti_pairs")
class NiftiPairs:
    name = "nifti_pairs"
    Options = NiftiPairsOptions

    def __init__(self, options: NiftiPairsOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        anchors = sorted(
            p for p in ctx.root.glob(o.images_glob) if p.is_file() and not p.name.startswith("._")
        )
        if not anchors:
            raise SourceError(
                f"{ctx.source}: no image volume matches {o.images_glob!r} under the source root",
                where=str(ctx.root),
                fix="point ROOT at the unpacked dataset (see the source's docs page)",
            )
        pattern = re.compile(o.image_regex)
        for anchor in anchors:
            rel = ctx.rel(anchor)
            found = pattern.search(rel)
            if found is None or "case" not in found.groupdict():
                yield ctx.quarantine(rel, f"file name does not match {o.image_regex!r}")
                continue
            groups = {k: v for k, v in found.groupdict().items() if v is not None}
            label = ctx.root / re.sub(o.label_replace[0], o.label_replace[1], rel)
            images = self._images(ctx, rel)
            missing = [p for p in [label, *(p for p, _ in images.values())] if not p.is_file()]
            if missing:
                yield ctx.quarantine(rel, f"{ctx.rel(missing[0])} is missing")
                continue
            attributes = {k: v for k, v in groups.items() if k != "case"}
            attributes.update(self._info(anchor, groups))
            stem = re.sub(r"\.nii(\.gz)?$", "", Path(rel).name)
            case = groups["case"] if o.sequences else stem
            yield from scan_case(
                ctx,
                o,
                CaseVolumes(
                    case=case,
                    images=images,
                    label=label,
                    labels=o.labels,
                    modality=o.modality or ctx.modality,
                    group_id=groups.get(o.group, groups["case"]),
                    attributes=attributes,
                ),
            )

    def _images(self, ctx: ScanContext, rel: str) -> dict[str, tuple[Path, int | None]]:
        if not self.o.sequences:
            return {"": (ctx.root / rel, None)}
        return {
            name: (ctx.root / re.sub(self.o.sequence_regex, repl, rel), None)
            for name, repl in self.o.sequences.items()
        }

    def _info(self, anchor: Path, groups: dict[str, str]) -> dict[str, str]:
        if self.o.info_file is None:
            return {}
        path = Path(self.o.info_file.format(**{**groups, "dir": anchor.parent.as_posix()}))
        if not path.is_file():
            return {}
        info = {}
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep:
                info[key.strip()] = value.strip()
        for group, keys in self.o.phase_from_info.items():
            number = re.sub(r"\D", "", groups.get(group, ""))
            for key in keys.split(","):
                if number and info.get(key, "").isdigit() and int(info[key]) == int(number):
                    info["phase"] = key
        return info
