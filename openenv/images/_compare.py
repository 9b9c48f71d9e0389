"""Two images compared layer by layer: bit for bit (the engine's layer digests), else by the files
each layer holds (path, kind, mode, owner, content or link), timestamps aside. Read from the engine
(`docker save`), never from the images' own programs."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["LayerDifference", "compare_images"]


@dataclass
class LayerDifference:
    """How two images differ, or `None` fields where they do not."""

    layers: int  # layers of the first image
    bitwise: bool  # every layer digest is the same
    differing_layer: int | None = None  # the first layer whose files differ (0-based)
    step: str | None = None  # the build step that made it (the image's history)
    paths: list[str] = field(default_factory=list)  # up to 10 paths whose content or kind differ

    @property
    def same_files(self) -> bool:
        return self.differing_layer is None


def compare_images(client: Any, first: str, second: str) -> LayerDifference:
    """Compare `first` and `second` on the engine of `client` (docker-py)."""
    a, b = client.images.get(first), client.images.get(second)
    la, lb = a.attrs["RootFS"]["Layers"], b.attrs["RootFS"]["Layers"]
    if la == lb:
        return LayerDifference(layers=len(la), bitwise=True)
    with tempfile.TemporaryDirectory(prefix="openenv-compare-") as tmp:
        files_a, steps = _layer_files(client, first, Path(tmp) / "a.tar")
        files_b, _ = _layer_files(client, second, Path(tmp) / "b.tar")
    for i in range(max(len(files_a), len(files_b))):
        if i < len(la) and i < len(lb) and la[i] == lb[i]:
            continue
        fa, fb = (files_a[i] if i < len(files_a) else {}), (files_b[i] if i < len(files_b) else {})
        if fa != fb:
            paths = sorted(p for p in fa.keys() | fb.keys() if fa.get(p) != fb.get(p))
            step = steps[i] if i < len(steps) and len(steps) == len(la) else None
            return LayerDifference(len(la), False, i, _short(step), paths[:10])
    return LayerDifference(layers=len(la), bitwise=False)


def _short(step: str | None) -> str | None:
    if step is None:
        return None
    return step.replace("/bin/sh -c #(nop) ", "").replace("/bin/sh -c ", "RUN ")[:200]


def _layer_files(client: Any, image: str, path: Path) -> tuple[list[dict[str, str]], list[str]]:
    """Each layer's files of `image` (bottom first: path -> fingerprint, timestamps left out), and
    the build step that made each layer (the image config's history, steps without a layer left out)."""
    with path.open("wb") as out:
        for chunk in client.api.get_image(image, chunk_size=1 << 20):
            out.write(chunk)
    with tarfile.open(path) as saved:
        manifest = json.load(_member(saved, "manifest.json"))
        config = json.load(_member(saved, manifest[0]["Config"]))
        steps = [str(h.get("created_by", "")) for h in config.get("history", []) if not h.get("empty_layer")]
        return [_fingerprints(saved, name) for name in manifest[0]["Layers"]], steps


def _member(saved: tarfile.TarFile, name: str) -> Any:
    found = saved.extractfile(name)
    if found is None:
        raise ValueError(f"the saved image has no file {name}")
    return found


def _fingerprints(saved: tarfile.TarFile, name: str) -> dict[str, str]:
    raw = _member(saved, name)
    out: dict[str, str] = {}
    with tempfile.TemporaryFile() as spool:  # a layer member is read as a stream once
        shutil.copyfileobj(raw, spool)
        spool.seek(0)
        with tarfile.open(fileobj=spool, mode="r|*") as layer:
            for member in layer:
                if member.isfile():
                    data = layer.extractfile(member)
                    digest = hashlib.sha256(data.read() if data is not None else b"").hexdigest()
                    kind = f"file:{digest}"
                elif member.issym() or member.islnk():
                    kind = f"link:{member.linkname}"
                else:
                    kind = f"type:{member.type!r}"
                out[member.name] = f"{kind}:{member.mode:o}:{member.uid}:{member.gid}"
    return out
