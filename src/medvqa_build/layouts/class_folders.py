"""``class_folders``: ``<images_dir>/.../<class>/<image>`` — the class is the image's folder
(Kvasir, HyperKvasir labeled-images, GastroVision, KID). Parent folders above the class can be
kept as attributes (HyperKvasir: ``{upper,lower}-gi-tract/<category>/<class>``)."""

from __future__ import annotations

from collections.abc import Iterator

from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Sample
from .base import IMAGE_EXTENSIONS, LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files


class ClassFoldersOptions(LayoutOptions):
    images_dir: str = "."
    parent_attributes: list[str] = []  # names for the folders above the class, outermost first
    extensions: list[str] = list(IMAGE_EXTENSIONS)


@LAYOUTS.register("class_folders")
class ClassFolders:
    name = "class_folders"
    Options = ClassFoldersOptions

    def __init__(self, options: ClassFoldersOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        base = ctx.require_dir(self.o.images_dir, "class")
        depth = len(self.o.parent_attributes) + 1
        for path in sorted_files(base, tuple(e.lower() for e in self.o.extensions)):
            rel = ctx.rel(path)
            folders = path.relative_to(base).parts[:-1]
            if len(folders) != depth:
                yield ctx.quarantine(
                    rel,
                    f"expected {depth} folder level(s) below {self.o.images_dir!r}, found {len(folders)}",
                )
                continue
            try:
                width, height = check_image(path, ctx.verify)
                label = ctx.canonical(folders[-1])
            except (ImageProblem, LabelProblem) as exc:
                yield ctx.quarantine(rel, str(exc))
                continue
            key = path.relative_to(ctx.root).with_suffix("").as_posix()
            yield Sample(
                sample_id=ctx.sample_id(key),
                source=ctx.source,
                image=rel,
                width=width,
                height=height,
                modality=ctx.modality,
                scene=ctx.scene,
                labels=(label,),
                attributes={
                    "source_label": folders[-1],
                    **dict(zip(self.o.parent_attributes, folders[:-1], strict=True)),
                },
                group_id=key,
            )
