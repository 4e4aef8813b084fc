"""Image embeddings from an open_clip model (SigLIP2, BiomedCLIP, CLIP, or a tiny test config).

Weights come from a local checkpoint file, a ``local-dir:`` folder, the Hugging Face cache, or
(when the machine is online) a download. When none of these can work the constructor fails at
once with one line naming the model and how to give a local checkpoint, instead of waiting on
hub retries.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from .embedder import (
    EMBEDDERS,
    EmbedderError,
    default_workers,
    l2_normalise,
    load_image_rgb,
    prefetch_batches,
)

log = logging.getLogger(__name__)

# Bump when the draft decode path changes pixels; it is part of the embedder id.
_DRAFT_VERSION = "jpegdraft1"
_TO_TENSOR = ("ToTensor", "MaybeToTensor")
_WEIGHT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt")
_DIR_WEIGHTS = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
_HOW_TO = (
    "download the weights on a machine with network and pass a local checkpoint "
    "(pretrained=/path/model.safetensors) or a folder (model_name=local-dir:/path with "
    "open_clip_config.json + open_clip_model.safetensors); see docs/negatives.md"
)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _cached_hub_dir(repo_id: str) -> str | None:
    """The local snapshot folder of an open_clip hub repo if config and weights are cached."""
    from huggingface_hub import try_to_load_from_cache

    cfg = try_to_load_from_cache(repo_id, "open_clip_config.json")
    if not isinstance(cfg, str):
        return None
    folder = Path(cfg).parent
    return str(folder) if any((folder / w).exists() for w in _DIR_WEIGHTS) else None


def _cached_tag_file(hf_hub: str) -> str | None:
    from huggingface_hub import try_to_load_from_cache

    repo_id, filename = os.path.split(hf_hub)  # "org/repo/" or "org/repo/file.bin"
    names = [filename] if filename else list(_DIR_WEIGHTS)
    if filename.endswith(".bin"):
        names.insert(0, filename[:-4] + ".safetensors")
    for name in names:
        hit = try_to_load_from_cache(repo_id, name)
        if isinstance(hit, str):
            return hit
    return None


@EMBEDDERS.register("open_clip")
class OpenClipEmbedder:
    """open_clip image tower, fp16 on CUDA, with decoding overlapped with the forward pass.

    ``decode="draft"`` (default): JPEGs are decoded at the smallest DCT scale that covers the
    model input, then the model's own resize/crop; uint8 pixels are normalised per batch on the
    device. ``decode="full"``: full decode + the model's whole preprocessing per image (the
    vectors of earlier versions; the id differs, so the cache keeps the two apart).
    ``overlap`` (default: on an accelerator only) decodes the next batches while the forward
    runs; without it each batch is decoded by ``workers`` threads (default: torch's thread
    count) and then embedded, so on a CPU the two phases never fight over the cores.
    """

    def __init__(
        self,
        model_name: str,
        pretrained: str | None = None,
        *,
        device: str = "auto",
        batch_size: int = 64,
        precision: str = "auto",
        workers: int | None = None,
        threads: int | None = None,
        allow_download: bool = True,
        seed: int = 0,
        decode: str = "draft",
        overlap: bool | None = None,
    ):
        import torch

        if decode not in ("draft", "full"):
            raise EmbedderError(f"unknown decode {decode!r}", fix="draft or full")

        if threads:
            torch.set_num_threads(int(threads))
        self.model_name, self.batch_size = model_name, int(batch_size)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        # On an accelerator the CPU decodes while the device runs the forward. On the CPU the
        # forward already uses every core: decoding and forward take turns on all of them.
        self.overlap = self.device.type != "cpu" if overlap is None else bool(overlap)
        if workers is None:
            workers = default_workers() if self.overlap else torch.get_num_threads()
        self.workers = int(workers)
        if precision == "auto":
            precision = "fp16" if self.device.type == "cuda" else "fp32"
        if precision not in ("fp16", "fp32", "bf16"):
            raise EmbedderError(f"unknown precision {precision!r}", fix="fp16, bf16 or fp32")
        self.precision = precision
        self._dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[
            precision
        ]
        kwargs, weights_id = self._resolve_weights(model_name, pretrained, allow_download)
        self._model, self._preprocess = self._create(kwargs, seed)
        self._norm = None  # (scale, bias) tensors on the device, made on first use
        self.weights_id = weights_id
        prep = hashlib.sha256(repr(self._preprocess).encode()).hexdigest()[:12]
        self._fast = self._split_preprocess() if decode == "draft" else None
        self.decode = "draft" if self._fast else "full"
        if self._fast:  # other pixels than a full decode: never mix with "full" vectors
            prep += f"+{_DRAFT_VERSION}"
        self.dim = int(self._probe_dim())
        self.id = f"open_clip:{model_name}:{weights_id}:prep-{prep}:{precision}"

    # -- construction -------------------------------------------------------------------------

    def _resolve_weights(
        self, model_name: str, pretrained: str | None, allow_download: bool
    ) -> tuple[dict, str]:
        import open_clip

        where = f"open_clip model {model_name!r}"
        if model_name.startswith("local-dir:"):
            folder = Path(model_name[len("local-dir:") :]).expanduser()
            weights = [folder / w for w in _DIR_WEIGHTS if (folder / w).exists()]
            if not (folder / "open_clip_config.json").exists() or not weights:
                raise EmbedderError(
                    f"no open_clip_config.json + weights in {folder}", where=where, fix=_HOW_TO
                )
            return {"model_name": model_name}, f"dir-{_file_digest(weights[0])}"
        if model_name.startswith("hf-hub:"):
            repo_id = model_name[len("hf-hub:") :]
            folder = _cached_hub_dir(repo_id)
            if folder:
                return {"model_name": f"local-dir:{folder}"}, f"hub-{repo_id}@{Path(folder).name}"
            self._check_can_download(where, allow_download)
            return {"model_name": model_name}, f"hub-{repo_id}"
        if model_name not in open_clip.list_models():
            raise EmbedderError(
                "unknown open_clip model",
                where=where,
                fix="see open_clip.list_models() or register a JSON with add_model_config",
            )
        if pretrained in (None, "", "none", "random"):
            log.warning("%s: no pretrained weights, embeddings are random projections", where)
            return {"model_name": model_name, "pretrained": None}, "random"
        path = Path(pretrained.removeprefix("file:")).expanduser()
        if path.exists() or path.suffix in _WEIGHT_SUFFIXES or os.sep in pretrained:
            if not path.is_file():
                raise EmbedderError(f"checkpoint {path} does not exist", where=where, fix=_HOW_TO)
            return {"model_name": model_name, "pretrained": str(path)}, f"file-{_file_digest(path)}"
        cfg = open_clip.get_pretrained_cfg(model_name, pretrained)
        if not cfg:
            tags = ", ".join(open_clip.list_pretrained_tags_by_model(model_name)) or "(none)"
            raise EmbedderError(
                f"unknown pretrained tag {pretrained!r}", where=where, fix=f"use one of: {tags}"
            )
        cached = _cached_tag_file(cfg["hf_hub"]) if cfg.get("hf_hub") else None
        if cached:
            # Load the cached file directly (no hub round-trip) with the tag's own settings.
            kwargs = {
                "model_name": model_name,
                "pretrained": cached,
                "force_quick_gelu": bool(cfg.get("quick_gelu", False)),
                "image_mean": cfg.get("mean"),
                "image_std": cfg.get("std"),
                "image_interpolation": cfg.get("interpolation"),
                "image_resize_mode": cfg.get("resize_mode"),
            }
            return {k: v for k, v in kwargs.items() if v is not None}, f"tag-{pretrained}"
        self._check_can_download(f"{where} weights {pretrained!r}", allow_download)
        return {"model_name": model_name, "pretrained": pretrained}, f"tag-{pretrained}"

    @staticmethod
    def _check_can_download(where: str, allow_download: bool) -> None:
        if not allow_download or _offline():
            why = "downloads disabled" if not allow_download else "HF_HUB_OFFLINE is set"
            raise EmbedderError(
                f"weights not in the local cache and {why}", where=where, fix=_HOW_TO
            )
        if not _hub_reachable():
            raise EmbedderError(
                "weights not in the local cache and the Hugging Face Hub is unreachable",
                where=where,
                fix=_HOW_TO,
            )

    def _create(self, kwargs: dict, seed: int):
        import open_clip
        import torch

        torch.manual_seed(seed)  # random-init models must embed identically on every run
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(**kwargs)
        except Exception as exc:  # open_clip raises RuntimeError/FileNotFoundError/ValueError/...
            text = str(exc).strip()
            first = text.splitlines()[0][:200] if text else type(exc).__name__
            raise EmbedderError(
                f"cannot load weights ({first})",
                where=f"open_clip model {self.model_name!r}",
                fix=_HOW_TO,
            ) from exc
        model = model.to(self.device, dtype=self._dtype).eval()
        return model, preprocess

    def _split_preprocess(self):
        """``(pil_steps, min_size, scale, bias)`` when the model's preprocessing is PIL steps
        then ToTensor then Normalize (open_clip's eval transforms), else None.

        The PIL steps (resize, crop, mode) run in the decode threads on a JPEG decoded at the
        smallest DCT scale that still covers the model input, and return uint8 arrays; the
        batch is converted and normalised at once (``x * scale + bias`` per channel, equal to
        ToTensor + Normalize up to float rounding) on the model's device.
        """
        steps = list(getattr(self._preprocess, "transforms", []))
        names = [type(t).__name__ for t in steps]
        if len(steps) < 2 or names[-1] != "Normalize" or names[-2] not in _TO_TENSOR:
            return None
        mean = np.asarray(steps[-1].mean, dtype=np.float32)
        std = np.asarray(steps[-1].std, dtype=np.float32)
        if mean.shape != (3,) or std.shape != (3,) or getattr(steps[-1], "inplace", False):
            return None
        # The decode must cover the largest size any step resizes or crops to.
        sizes = [getattr(self._model.visual, "preprocess_cfg", {}).get("size")]
        sizes += [getattr(t, a, None) for t in steps[:-2] for a in ("size", "max_size")]
        flat = [int(v) for z in sizes if z for v in (z if isinstance(z, (tuple, list)) else (z,))]
        min_size = max(flat) if flat else None  # None: no draft decoding
        return steps[:-2], min_size, 1.0 / (255.0 * std), -mean / std

    def _probe_dim(self) -> int:
        out_dim = getattr(getattr(self._model, "visual", None), "output_dim", None)
        if out_dim:
            return int(out_dim)
        from PIL import Image

        x = self._preprocess(Image.new("RGB", (32, 32)))[None].to(self.device, dtype=self._dtype)
        return int(self._encode(x).shape[1])

    # -- embedding ----------------------------------------------------------------------------

    def _load(self, path: str):
        """One image, ready for ``_batch``: a uint8 HxWx3 array (fast path) or a tensor."""
        if self._fast is None:
            return self._preprocess(load_image_rgb(path))
        steps, min_size, _, _ = self._fast
        img = load_image_rgb(path, min_size=min_size)
        for step in steps:
            if getattr(step, "size", None) == (img.height, img.width) and type(step).__name__ in (
                "CenterCrop",
                "CenterCropOrPad",
            ):
                continue  # cropping to the image's own size copies it and changes nothing
            img = step(img)
        return np.asarray(img.convert("RGB") if img.mode != "RGB" else img)

    def _batch(self, items: list):
        """Stack loaded images into the model's input tensor on its device."""
        import torch

        if self._fast is None:
            return torch.stack(items).to(self.device, dtype=self._dtype, non_blocking=True)
        if self._norm is None:
            _, _, scale, bias = self._fast
            self._norm = tuple(
                torch.from_numpy(v).view(1, 3, 1, 1).to(self.device) for v in (scale, bias)
            )
        pixels = torch.from_numpy(np.stack(items)).to(self.device, non_blocking=True)
        x = pixels.permute(0, 3, 1, 2).to(torch.float32, memory_format=torch.contiguous_format)
        return x.mul_(self._norm[0]).add_(self._norm[1]).to(self._dtype)

    def _encode(self, batch) -> np.ndarray:
        import torch

        with torch.inference_mode():
            feats = self._model.encode_image(batch)
        return l2_normalise(feats.float().cpu().numpy())

    def _forward(self, items: list) -> np.ndarray:
        return self._encode(self._batch(items))

    def embed_paths(self, paths: Sequence[str]) -> np.ndarray:
        """Embeddings of ``paths`` in order, shape ``(len(paths), dim)``, float32, unit norm."""
        out = np.empty((len(paths), self.dim), dtype=np.float32)
        row = 0
        depth = 2 if self.overlap else 0
        batches = prefetch_batches(list(paths), self._load, self.batch_size, self.workers, depth)
        for batch in batches:
            out[row : row + len(batch)] = self._forward(batch)
            row += len(batch)
        return out

    # -- for the benchmarks ---------------------------------------------------------------------

    def preprocess_path(self, path: str):
        """One decoded, preprocessed image as ``embed_paths`` loads it."""
        return self._load(path)

    def prepare_batch(self, items: list):
        """The model input tensor (on the device) of ``preprocess_path`` results."""
        return self._batch(items)

    def forward_preprocessed(self, items: list) -> np.ndarray:
        """Embeddings of ``preprocess_path`` results (batch conversion + model forward)."""
        return self._forward(items)
