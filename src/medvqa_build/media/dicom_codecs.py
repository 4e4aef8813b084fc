"""Which pixel-data plugin decodes which DICOM transfer syntax, and the quarantine reasons for
a file no installed plugin decodes (or whose compressed data every plugin refuses).

pydicom decodes native (uncompressed), deflated and RLE data itself; the compressed syntaxes
need a plugin. The project depends on the pylibjpeg family (pydicom's "Pixel Data handlers"
table): pylibjpeg-libjpeg for JPEG (8/12-bit, lossless) and JPEG-LS, pylibjpeg-openjpeg for
JPEG 2000 and HTJ2K, pylibjpeg-rle for fast RLE. Video (MPEG-2, H.264, HEVC), JPIP-referenced
and JPEG 2000 Part 2 syntaxes have no pydicom decoder at all.
"""

from __future__ import annotations

import re

_LIBJPEG = "pylibjpeg with pylibjpeg-libjpeg (pip install pylibjpeg pylibjpeg-libjpeg)"
_OPENJPEG = "pylibjpeg with pylibjpeg-openjpeg (pip install pylibjpeg pylibjpeg-openjpeg)"
_RLE = "pydicom itself (or pylibjpeg with pylibjpeg-rle)"
_NATIVE = "pydicom itself"
# transfer syntax UID -> the plugin that decodes it
PLUGINS: dict[str, str] = {
    "1.2.840.10008.1.2": _NATIVE,  # Implicit VR Little Endian
    "1.2.840.10008.1.2.1": _NATIVE,  # Explicit VR Little Endian
    "1.2.840.10008.1.2.1.99": _NATIVE,  # Deflated Explicit VR Little Endian
    "1.2.840.10008.1.2.2": _NATIVE,  # Explicit VR Big Endian (retired)
    "1.2.840.10008.1.2.4.50": _LIBJPEG,  # JPEG Baseline (Process 1); Pillow also does
    "1.2.840.10008.1.2.4.51": _LIBJPEG,  # JPEG Extended (Process 2 and 4), 12-bit
    "1.2.840.10008.1.2.4.57": _LIBJPEG,  # JPEG Lossless (Process 14)
    "1.2.840.10008.1.2.4.70": _LIBJPEG,  # JPEG Lossless SV1
    "1.2.840.10008.1.2.4.80": _LIBJPEG,  # JPEG-LS Lossless
    "1.2.840.10008.1.2.4.81": _LIBJPEG,  # JPEG-LS Near-Lossless
    "1.2.840.10008.1.2.4.90": _OPENJPEG,  # JPEG 2000 (Lossless Only)
    "1.2.840.10008.1.2.4.91": _OPENJPEG,  # JPEG 2000
    "1.2.840.10008.1.2.4.201": _OPENJPEG,  # HTJ2K (Lossless Only)
    "1.2.840.10008.1.2.4.202": _OPENJPEG,  # HTJ2K with RPCL (Lossless Only)
    "1.2.840.10008.1.2.4.203": _OPENJPEG,  # HTJ2K
    "1.2.840.10008.1.2.5": _RLE,  # RLE Lossless
}
NO_PLUGIN = (
    "no pydicom pixel-data plugin decodes it (video, JPIP-referenced and JPEG 2000 Part 2 "
    "syntaxes): export the frames with the vendor's or DCMTK's tools first"
)
# quoted text in a library's message may be a header value (a name, an ID, a date)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def syntax_text(syntax) -> str:
    """``"JPEG 2000 Image Compression (1.2.840.10008.1.2.4.91)"``; the UID alone if unknown."""
    if syntax is None:
        return "no transfer syntax (file meta lacks (0002,0010))"
    name = getattr(syntax, "name", "")
    return f"{name} ({syntax})" if name and name != str(syntax) else str(syntax)


def plugin_for(syntax) -> str:
    """The plugin that decodes ``syntax``, in words a user can act on."""
    return PLUGINS.get(str(syntax), NO_PLUGIN)


def missing_decoder(syntax) -> str | None:
    """The quarantine reason when no installed plugin decodes ``syntax``; None when one does."""
    from pydicom.pixels import get_decoder

    if syntax is None:
        return None
    try:
        available = get_decoder(syntax).is_available
    except NotImplementedError:  # pydicom has no decoder for it at all (MPEG, H.264, HEVC)
        available = False
    if available:
        return None
    return (
        f"transfer syntax {syntax_text(syntax)}: no installed plugin decodes it; "
        f"decoded by {plugin_for(syntax)}"
    )


def redact(message: str, limit: int = 160) -> str:
    """First line of a library's message with quoted values removed (they may be PHI)."""
    first = (str(message).strip().splitlines() or [""])[0]
    first = _QUOTED.sub("'…'", first)
    return first if len(first) <= limit else first[: limit - 1] + "…"


def decode_failure(syntax, exc: BaseException) -> str:
    """The reason for pixel data the installed plugins could not decode (corrupt or odd)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        # pydicom: "Unable to decode ... by all available plugins:" then "<plugin>: <error>" lines
        detail = "; ".join(redact(line, 120) for line in lines[1:])
    else:
        detail = redact(lines[0] if lines else "")
    return (
        f"cannot decode {syntax_text(syntax)} pixel data ({exc.__class__.__name__}: {detail}); "
        f"it is decoded by {plugin_for(syntax)}, so the data is likely corrupt"
    )
